// Fused classifier + cross-entropy (see cross_entropy.hpp). Rows are processed in chunks of
// kChunk: logits chunk → in-place softmax gradient → dx and dW contributions by two matmuls.
#include "kernels/cpu/cross_entropy.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {

namespace {
constexpr int64_t kChunk = 512;

// Per row: loss = logsumexp(l) - l[target]; with grad, l becomes the loss gradient
// grad_scale * (softmax(l) - onehot(target)) (all zero when grad_scale is 0).
DT_SIMD void softmax_rows(float* logits, const int32_t* targets, float* losses, int64_t n, int64_t V,
                          bool grad, float grad_scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    float* l = logits + r * V;
    float mx = l[0];
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < V; ++v) mx = l[v] > mx ? l[v] : mx;
    const int32_t tgt = targets[r];
    const float lt = l[tgt];
    float sum = 0.0f;
    if (grad) {
#pragma omp simd reduction(+ : sum)
      for (int64_t v = 0; v < V; ++v) {
        l[v] = fast_exp(l[v] - mx);
        sum += l[v];
      }
      const float k = grad_scale / sum;
#pragma omp simd
      for (int64_t v = 0; v < V; ++v) l[v] *= k;
      l[tgt] -= grad_scale;
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t v = 0; v < V; ++v) sum += fast_exp(l[v] - mx);
    }
    losses[r] = std::log(sum) + mx - lt;
  }
}
}  // namespace

void classifier_logits(const float* x, const float* W, const float* bias, float* out, int64_t rows,
                       int64_t d, int64_t V, Precision p) {
  linear_forward(x, W, bias, out, rows, d, V, p);
}

double classifier_cross_entropy(const ClassifierArgs& a, float* per_row) {
  const int64_t chunk = std::min(kChunk, a.N);
  float* logits = scratch(ScratchSlot::classifier, chunk * a.V + kChunk);
  float* losses = logits + chunk * a.V;
  double total = 0.0;
  for (int64_t r0 = 0; r0 < a.N; r0 += chunk) {
    const int64_t n = std::min(chunk, a.N - r0);
    const float* xc = a.x + r0 * a.d;
    linear_forward(xc, a.W, a.bias, logits, n, a.d, a.V, a.precision);
    softmax_rows(logits, a.targets + r0, losses, n, a.V, a.dx != nullptr, a.grad_scale);
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
