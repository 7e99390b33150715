// Fused classifier + cross-entropy (see cross_entropy.hpp). Rows are processed in chunks of
// kChunk: logits chunk → row statistics (combined across vocabulary slices) → in-place softmax
// gradient → dx and dW contributions by two matmuls.
#include "kernels/cpu/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {

namespace {
constexpr int64_t kChunk = 512;

// Per row r of a chunk of logits l (vocabulary slice [v0, v0 + V)): mx[r] = max, then with the
// other slices' combined (when `combine` is set), st[2r] = sum of exp(l - mx), st[2r+1] = the
// target's logit (0 when the target lies in another slice); with grad, l becomes exp(l - mx).
// (Only the first W of each row's V logits are words: the rest pad the slice.)
DT_SIMD void row_max(const float* logits, float* mx, int64_t n, int64_t V, int64_t W) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const float* l = logits + r * V;
    float m = -std::numeric_limits<float>::max();
#pragma omp simd reduction(max : m)
    for (int64_t v = 0; v < W; ++v) m = l[v] > m ? l[v] : m;
    mx[r] = m;
  }
}

DT_SIMD void row_sums(float* logits, const int32_t* targets, const float* mx, float* st, int64_t n, int64_t V,
                      int64_t W, int64_t v0, bool grad) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    float* l = logits + r * V;
    const int64_t t = int64_t(targets[r]) - v0;
    st[2 * r + 1] = t >= 0 && t < W ? l[t] : 0.0f;
    const float m = mx[r];
    float sum = 0.0f;
    if (grad) {
#pragma omp simd reduction(+ : sum)
      for (int64_t v = 0; v < W; ++v) {
        l[v] = fast_exp(l[v] - m);
        sum += l[v];
      }
      for (int64_t v = W; v < V; ++v) l[v] = 0.0f;  // padding: no gradient
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t v = 0; v < W; ++v) sum += fast_exp(l[v] - m);
    }
    st[2 * r] = sum;
  }
}

// loss = log(sum) + max - target logit; with grad, l (holding exp(l - max)) becomes the loss
// gradient grad_scale * (softmax - onehot(target)) (all zero when grad_scale is 0).
DT_SIMD void row_losses(float* logits, const int32_t* targets, const float* mx, const float* st, float* losses,
                        int64_t n, int64_t V, int64_t W, int64_t v0, bool grad, float grad_scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    losses[r] = std::log(st[2 * r]) + mx[r] - st[2 * r + 1];
    if (!grad) continue;
    float* l = logits + r * V;
    const float k = grad_scale / st[2 * r];
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) l[v] *= k;
    const int64_t t = int64_t(targets[r]) - v0;
    if (t >= 0 && t < W) l[t] -= grad_scale;
  }
}
}  // namespace

void classifier_logits(const float* x, const float* W, const float* bias, float* out, int64_t rows,
                       int64_t d, int64_t V, Precision p) {
  linear_forward(x, W, bias, out, rows, d, V, p);
}

double classifier_cross_entropy(const ClassifierArgs& a, float* per_row) {
  const int64_t chunk = std::min(kChunk, a.N);
  float* logits = scratch(ScratchSlot::classifier, chunk * a.V + 4 * kChunk);
  float* losses = logits + chunk * a.V;
  float* mx = losses + kChunk;
  float* st = mx + kChunk;  // 2 per row
  double total = 0.0;
  for (int64_t r0 = 0; r0 < a.N; r0 += chunk) {
    const int64_t n = std::min(chunk, a.N - r0);
    const float* xc = a.x + r0 * a.d;
    linear_forward(xc, a.W, a.bias, logits, n, a.d, a.V, a.precision);
    const bool grad = a.dx != nullptr;
    const int64_t W = a.words >= 0 ? a.words : a.V;
    row_max(logits, mx, n, a.V, W);
    if (a.combine) a.combine->max(mx, n);
    row_sums(logits, a.targets + r0, mx, st, n, a.V, W, a.vocab_begin, grad);
    if (a.combine) a.combine->sum(st, 2 * n);
    row_losses(logits, a.targets + r0, mx, st, losses, n, a.V, W, a.vocab_begin, grad, a.grad_scale);
    for (int64_t r = 0; r < n; ++r) {
      total += losses[r];
      if (per_row) per_row[r0 + r] = losses[r];
    }
    if (a.dx) {
      linear_backward_input(logits, a.W, a.dx + r0 * a.d, n, a.d, a.V, false, a.precision);
      linear_backward_weight(logits, xc, a.dW, n, a.d, a.V, a.precision);
      if (a.dbias) colsum_accumulate(logits, a.dbias, n, a.V);
    }
  }
  return total;
}

}  // namespace dtrain
