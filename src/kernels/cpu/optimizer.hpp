// Optimizer updates over flat f32 arrays: AdamW (PyTorch semantics, decoupled weight decay) and SGD.
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWHyper& h);

void sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const SgdHyper& h);

}  // namespace dtrain
