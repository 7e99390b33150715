// Optimizer kernels (see optimizer.hpp); formulas follow torch.optim.AdamW / SGD exactly.
#include "kernels/cpu/optimizer.hpp"
#include "kernels/cpu/simd.hpp"

#include <cmath>

namespace dtrain {

DT_SIMD void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWHyper& h) {
  const float bc1 = 1.0f - std::pow(h.beta1, float(h.step));
  const float bc2 = 1.0f - std::pow(h.beta2, float(h.step));
  const float step_size = h.lr / bc1;
  const float bc2_sqrt = std::sqrt(bc2);
  const float decay = 1.0f - h.lr * h.weight_decay;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= decay;
    m[i] = h.beta1 * m[i] + (1.0f - h.beta1) * g[i];
    v[i] = h.beta2 * v[i] + (1.0f - h.beta2) * g[i] * g[i];
    const float denom = std::sqrt(v[i]) / bc2_sqrt + h.eps;
    p[i] -= step_size * m[i] / denom;
  }
}

DT_SIMD void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdHyper& h) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i] + h.weight_decay * p[i];
    if (h.momentum != 0.0f) {
      buf[i] = h.first_step ? d : h.momentum * buf[i] + d;
      d = buf[i];
    }
    p[i] -= h.lr * d;
  }
}

}  // namespace dtrain
