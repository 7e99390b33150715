// Fused classifier + cross-entropy (see cross_entropy.hpp). Rows are processed in chunks (kChunk
// rows, kChunkBf16 in bf16), a chunk in pieces of kPieceRows: a piece's logits → row statistics
// (combined across vocabulary slices) → in-place softmax gradient → its bias sums, while the piece
// is in cache; then the chunk's dx and dW by two matmuls. In bf16 each operand is rounded once: the
// weights per call (none where given in bf16), a chunk's inputs per chunk, the logits' gradient as
// softmax writes it (not once per product).
#include "kernels/cpu/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {

namespace {
// Rows of the gradient products (dx's M, dW's K): in bf16 twice f32's, as they read the gradient's
// 2-byte copy (the same bytes a chunk), and dW's product is faster with the longer K.
constexpr int64_t kChunk = 512;
constexpr int64_t kChunkBf16 = 1024;
constexpr int64_t kPieceRows = 128;  // rows whose logits are made into losses and gradients at once, in cache

// The three steps on one row l of a chunk of logits (vocabulary slice [v0, v0 + V), of which the
// first W are words and the rest pad the slice). t: the target's column in the slice.
struct RowGeometry {
  int64_t V, W, v0;
};

// 1. the row's max
DT_SIMD inline float row_max(const float* l, const RowGeometry& g) {
  float m = -std::numeric_limits<float>::max();
#pragma omp simd reduction(max : m)
  for (int64_t v = 0; v < g.W; ++v) m = l[v] > m ? l[v] : m;
  return m;
}

// 2. with the max m (combined across slices): st[0] = sum of exp(l - m), st[1] = the target's logit
// (0 when it lies in another slice); with grad, l becomes exp(l - m) (0 on padding)
DT_SIMD inline void row_sums(float* l, int64_t t, float m, float* st, const RowGeometry& g, bool grad) {
  st[1] = t >= 0 && t < g.W ? l[t] : 0.0f;
  float sum = 0.0f;
  if (grad) {
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < g.W; ++v) {
      l[v] = fast_exp(l[v] - m);
      sum += l[v];
    }
    for (int64_t v = g.W; v < g.V; ++v) l[v] = 0.0f;
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < g.W; ++v) sum += fast_exp(l[v] - m);
  }
  st[0] = sum;
}

// 3. with the sums combined: the loss log(sum) + max - target logit; with grad, l becomes the loss
// gradient grad_scale * (softmax - onehot(target)) (all zero when grad_scale is 0), and l16 (when
// given) its bf16 copy, written while the row is in cache
DT_SIMD inline float row_loss(float* l, int64_t t, float m, const float* st, const RowGeometry& g, bool grad,
                              float grad_scale, uint16_t* l16) {
  if (grad) {
    const float k = grad_scale / st[0];
    const bool hit = t >= 0 && t < g.W;
    if (l16) {
#pragma omp simd
      for (int64_t v = 0; v < g.V; ++v) {
        l[v] *= k;
        store_as(l16 + v, l[v]);
      }
    } else {
#pragma omp simd
      for (int64_t v = 0; v < g.V; ++v) l[v] *= k;
    }
    if (hit) {
      l[t] -= grad_scale;
      if (l16) store_as(l16 + t, l[t]);
    }
  }
  return std::log(st[0]) + m - st[1];
}

// The first word of the row (of this slice) whose logit is m, as a global word index; a huge value
// when none is (m came from another slice).
inline float first_at(const float* l, float m, const RowGeometry& g) {
  for (int64_t v = 0; v < g.W; ++v)
    if (l[v] == m) return float(g.v0 + v);
  return 3.0e38f;
}

// The rows of a piece: one pass per row while it is in cache; with other vocabulary slices, each
// step over every row, their statistics combined between the steps. first (when given): each row's
// predicted word, the first with the highest logit (as argmax), combined across slices. g16 (when
// given, with grad): the gradient's bf16 copy, [n, V].
void softmax_rows(float* logits, const int32_t* targets, float* mx, float* st, float* first, float* losses,
                  int64_t n, const RowGeometry& g, bool grad, float grad_scale, RowStatsCombiner* combine,
                  uint16_t* g16) {
  auto row = [&](int64_t r) { return logits + r * g.V; };
  auto row16 = [&](int64_t r) { return g16 ? g16 + r * g.V : nullptr; };
  auto target = [&](int64_t r) { return int64_t(targets[r]) - g.v0; };
  if (!combine) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      mx[r] = row_max(row(r), g);
      if (first) first[r] = first_at(row(r), mx[r], g);
      row_sums(row(r), target(r), mx[r], st + 2 * r, g, grad);
      losses[r] = row_loss(row(r), target(r), mx[r], st + 2 * r, g, grad, grad_scale, row16(r));
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) mx[r] = row_max(row(r), g);
  combine->max(mx, n);
  if (first) {  // the lowest index of the maximum over all slices: the max of its negation
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r) first[r] = -first_at(row(r), mx[r], g);
    combine->max(first, n);
    for (int64_t r = 0; r < n; ++r) first[r] = -first[r];
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) row_sums(row(r), target(r), mx[r], st + 2 * r, g, grad);
  combine->sum(st, 2 * n);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r)
    losses[r] = row_loss(row(r), target(r), mx[r], st + 2 * r, g, grad, grad_scale, row16(r));
}
}  // namespace

void classifier_logits(const float* x, const float* W, const float* bias, float* out, int64_t rows,
                       int64_t d, int64_t V, Precision p) {
  linear_forward(x, W, bias, out, rows, d, V, p);
}

bool classifier_converts_once(const ClassifierArgs& a, bool bf16_products) {
  return matmul_copies_to_bf16(linear_forward_args(a.N, a.d, a.V, a.bias, a.precision), bf16_products);
}

int64_t classifier_chunk_rows(const ClassifierArgs& a, bool bf16_products) {
  return std::min(classifier_converts_once(a, bf16_products) ? kChunkBf16 : kChunk, a.N);
}

namespace {
// The rows of a piece: kPieceRows, or kChunk where the rows' statistics are combined with other
// vocabulary slices (a piece at a time would multiply the collectives). Never more than kChunk: the
// scratch's row statistics hold kChunk rows.
int64_t piece_rows(const ClassifierArgs& a, bool bf16_products) {
  return std::min(a.combine ? kChunk : kPieceRows, classifier_chunk_rows(a, bf16_products));
}
// Rows of logits the scratch holds: a piece in bf16 (the products read the gradient's bf16 copy), the
// chunk in f32 (they read the f32 gradient).
int64_t logits_rows(const ClassifierArgs& a, bool bf16_products) {
  return classifier_converts_once(a, bf16_products) ? piece_rows(a, bf16_products)
                                                    : classifier_chunk_rows(a, bf16_products);
}
}  // namespace

int64_t classifier_scratch_floats(const ClassifierArgs& a, bool bf16_products) {
  return logits_rows(a, bf16_products) * a.V + 5 * kChunk + 2 * a.V;
}

namespace {
// The classifier's scratch: the logits, the row statistics of a piece, the bias gradient's sums.
struct ChunkScratch {
  float *logits, *losses, *mx, *st, *first;  // st: 2 per row; first: only when counting right predictions
  ColumnSums bias;
};
ChunkScratch chunk_scratch(const ClassifierArgs& a, bool bf16_products) {
  float* logits = scratch(ScratchSlot::classifier, classifier_scratch_floats(a, bf16_products));
  float* losses = logits + logits_rows(a, bf16_products) * a.V;
  float* mx = losses + kChunk;
  float* st = mx + kChunk;
  float* sums = st + 3 * kChunk;
  std::fill(sums, sums + 2 * a.V, 0.0f);
  return {logits, losses, mx, st, a.correct ? st + 2 * kChunk : nullptr, ColumnSums{sums, sums + a.V, a.V}};
}

// The operands of a chunk's products: f32 (x and W as given, the f32 gradient in the logits
// scratch) or bf16 copies made once (W per call unless given in bf16; a chunk's inputs per chunk; its
// logits' gradient, written by softmax_rows a piece at a time).
struct ChunkOperands {
  const float* x;
  const uint16_t *W16, *x16;
  uint16_t* g16;
};

// Logits of the piece of m rows at row p0 of the chunk, into `logits`.
void piece_logits(const ClassifierArgs& a, const ChunkOperands& o, int64_t p0, int64_t m, float* logits) {
  const MatmulArgs args = linear_forward_args(m, a.d, a.V, a.bias, a.precision);
  if (o.W16)
    matmul_bf16(o.x16 + p0 * a.d, o.W16, logits, args);
  else
    matmul(o.x + p0 * a.d, a.W, logits, args);
}

// dx (overwritten) and dW (accumulated) from the chunk's n rows of logits' gradient.
void chunk_gradients(const ClassifierArgs& a, const ChunkOperands& o, const float* g, float* dx, int64_t n) {
  if (o.W16) {
    matmul_bf16(o.g16, o.W16, dx, linear_backward_input_args(n, a.d, a.V, false, a.precision));
    matmul_bf16(o.g16, o.x16, a.dW, linear_backward_weight_args(n, a.d, a.V, a.precision));
  } else {
    matmul(g, a.W, dx, linear_backward_input_args(n, a.d, a.V, false, a.precision));
    linear_backward_weight(g, o.x, a.dW, n, a.d, a.V, a.precision);
  }
}

// The losses of rows [row0, row0 + m) (the piece just done) added to total, row by row (the order of
// the sum does not depend on the pieces); per_row and the count of right predictions updated.
void tally_piece(const ClassifierArgs& a, const ChunkScratch& s, int64_t row0, int64_t m, float* per_row,
                 double& total) {
  for (int64_t r = 0; r < m; ++r) {
    total += s.losses[r];
    if (per_row) per_row[row0 + r] = s.losses[r];
    if (a.correct) *a.correct += s.first[r] == float(a.targets[row0 + r]) ? 1.0 : 0.0;
  }
}
}  // namespace

// Chunk by chunk; within a chunk, piece by piece: the piece's logits, its softmax (and gradient) and
// its bias sums while it is in cache; then the chunk's two gradient products.
double classifier_cross_entropy(const ClassifierArgs& a, float* per_row) {
  const bool products = bf16_products_for(a.precision);
  const int64_t chunk = classifier_chunk_rows(a, products), piece = piece_rows(a, products);
  const bool bf16 = classifier_converts_once(a, products), grad = a.dx != nullptr;
  ChunkScratch s = chunk_scratch(a, products);
  ChunkOperands o{nullptr, bf16 ? bf16_operand(a.W, Bf16Copy::b, a.V * a.d) : nullptr, nullptr,
                  bf16 && grad ? matmul_bf16_buffer(Bf16Copy::a, chunk * a.V) : nullptr};
  const RowGeometry g{a.V, a.words >= 0 ? a.words : a.V, a.vocab_begin};
  double total = 0.0;
  for (int64_t r0 = 0; r0 < a.N; r0 += chunk) {
    const int64_t n = std::min(chunk, a.N - r0);
    o.x = a.x + r0 * a.d;
    if (bf16) o.x16 = matmul_bf16_copy(Bf16Copy::c, o.x, n * a.d);
    for (int64_t p0 = 0; p0 < n; p0 += piece) {
      const int64_t m = std::min(piece, n - p0);
      float* logits = bf16 ? s.logits : s.logits + p0 * a.V;
      piece_logits(a, o, p0, m, logits);
      softmax_rows(logits, a.targets + r0 + p0, s.mx, s.st, s.first, s.losses, m, g, grad, a.grad_scale, a.combine,
                   o.g16 ? o.g16 + p0 * a.V : nullptr);
      tally_piece(a, s, r0 + p0, m, per_row, total);
      if (grad && a.dbias) s.bias.add(logits, m);
    }
    if (!grad) continue;
    chunk_gradients(a, o, s.logits, a.dx + r0 * a.d, n);
    if (a.dbias) s.bias.add_to(a.dbias);
  }
  return total;
}

}  // namespace dtrain
