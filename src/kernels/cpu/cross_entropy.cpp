// Fused classifier + cross-entropy (see cross_entropy.hpp). Rows are processed in chunks of
// kChunk: logits chunk → row statistics (combined across vocabulary slices) → in-place softmax
// gradient → dx and dW contributions by two matmuls. In bf16 each operand is rounded once: the
// weights per call (none where given in bf16), a chunk's inputs and its logits' gradient per chunk
// (not once per product).
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
constexpr int64_t kChunk = 512;

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
#pragma omp simd
    for (int64_t v = 0; v < g.V; ++v) l[v] *= k;
    if (t >= 0 && t < g.W) l[t] -= grad_scale;
    if (l16) {
      const uint32_t* bits = reinterpret_cast<const uint32_t*>(l);
#pragma omp simd
      for (int64_t v = 0; v < g.V; ++v) l16[v] = bf16_bits_of(bits[v]);
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

// The rows of a chunk: one pass per row while it is in cache; with other vocabulary slices, each
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

int64_t classifier_chunk_rows(const ClassifierArgs& a) { return std::min(kChunk, a.N); }
int64_t classifier_scratch_floats(const ClassifierArgs& a) { return classifier_chunk_rows(a) * a.V + 5 * kChunk; }

namespace {
// The chunk's products in bf16 from copies made once: the weights once per call (Bf16Copy::b), the
// chunk's inputs (c) once for the logits and dW, the logits' gradient (a, written by softmax_rows)
// once for dx and dW.
void chunk_logits_bf16(const ClassifierArgs& a, const uint16_t* W, const float* xc, float* logits, int64_t n,
                       const uint16_t** x) {
  *x = matmul_bf16_copy(Bf16Copy::c, xc, n * a.d);
  matmul_bf16(*x, W, logits, linear_forward_args(n, a.d, a.V, a.bias, a.precision));
}
void chunk_gradients_bf16(const ClassifierArgs& a, const uint16_t* W, const uint16_t* x, const uint16_t* g,
                          float* dx, int64_t n) {
  matmul_bf16(g, W, dx, linear_backward_input_args(n, a.d, a.V, false, a.precision));
  matmul_bf16(g, x, a.dW, linear_backward_weight_args(n, a.d, a.V, a.precision));
}
}  // namespace

bool classifier_converts_once(const ClassifierArgs& a) {
  return matmul_copies_to_bf16(linear_forward_args(classifier_chunk_rows(a), a.d, a.V, a.bias, a.precision));
}

double classifier_cross_entropy(const ClassifierArgs& a, float* per_row) {
  const int64_t chunk = classifier_chunk_rows(a);
  const bool bf16 = classifier_converts_once(a);
  const uint16_t* Wb = bf16 ? bf16_operand(a.W, Bf16Copy::b, a.V * a.d) : nullptr;
  const uint16_t* xb = nullptr;
  uint16_t* g16 = bf16 && a.dx ? matmul_bf16_buffer(Bf16Copy::a, chunk * a.V) : nullptr;
  float* logits = scratch(ScratchSlot::classifier, classifier_scratch_floats(a));
  float* losses = logits + chunk * a.V;
  float* mx = losses + kChunk;
  float* st = mx + kChunk;  // 2 per row
  float* first = a.correct ? st + 2 * kChunk : nullptr;
  double total = 0.0;
  for (int64_t r0 = 0; r0 < a.N; r0 += chunk) {
    const int64_t n = std::min(chunk, a.N - r0);
    const float* xc = a.x + r0 * a.d;
    if (bf16)
      chunk_logits_bf16(a, Wb, xc, logits, n, &xb);
    else
      matmul(xc, a.W, logits, linear_forward_args(n, a.d, a.V, a.bias, a.precision));
    const RowGeometry g{a.V, a.words >= 0 ? a.words : a.V, a.vocab_begin};
    softmax_rows(logits, a.targets + r0, mx, st, first, losses, n, g, a.dx != nullptr, a.grad_scale, a.combine, g16);
    for (int64_t r = 0; r < n; ++r) {
      total += losses[r];
      if (per_row) per_row[r0 + r] = losses[r];
    }
    if (a.correct)
      for (int64_t r = 0; r < n; ++r) *a.correct += first[r] == float(a.targets[r0 + r]) ? 1.0 : 0.0;
    if (a.dx) {
      if (bf16) {
        chunk_gradients_bf16(a, Wb, xb, g16, a.dx + r0 * a.d, n);
      } else {
        matmul(logits, a.W, a.dx + r0 * a.d, linear_backward_input_args(n, a.d, a.V, false, a.precision));
        linear_backward_weight(logits, xc, a.dW, n, a.d, a.V, a.precision);
      }
      if (a.dbias) colsum_accumulate(logits, a.dbias, n, a.V);
    }
  }
  return total;
}

}  // namespace dtrain
