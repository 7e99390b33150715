// LayerNorm over the last dimension, forward and backward.
#pragma once
#include <cstdint>

namespace dtrain {

// y = (x - mean) * rstd * gamma + beta per row; saves mean and rstd [rows] for backward.
void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                       float* rstd, int64_t rows, int64_t dim, float eps);
// dx (+)= ..., dgamma += ..., dbeta += ...  (dx may not alias dy unless accumulate_dx is false)
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                        const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                        int64_t dim, bool accumulate_dx);
// The floats of the scratch the backward takes (each block of rows' partial dgamma and dbeta).
int64_t layernorm_backward_scratch_floats(int64_t rows, int64_t dim);

}  // namespace dtrain
