// Optimizer updates over flat f32 arrays: AdamW (PyTorch semantics, decoupled weight decay) and SGD.
#pragma once
#include <cstdint>

namespace dtrain {

struct AdamWHyper {
  float lr, beta1, beta2, eps, weight_decay;
  int64_t step;  // 1-based, after increment
};

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWHyper& h);

struct SgdHyper {
  float lr, momentum, weight_decay;
  bool first_step;  // momentum buffer starts as the first gradient (PyTorch)
};

void sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const SgdHyper& h);

}  // namespace dtrain
