// RMSNorm over the last dimension (the Llama block's norm: no mean, no bias), forward and backward.
#pragma once
#include <cstdint>

namespace dtrain {

// y = x / sqrt(mean(x^2) + eps) * w per row of [rows, dim]; rstd[row] = 1 / sqrt(mean(x^2) + eps) is kept for backward.
void rmsnorm_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t dim, float eps);
// dx = (or += when accumulate_dx) the input's gradient; dw += the weight's gradient (summed over rows).
// dx may alias dy when accumulate_dx is false.
void rmsnorm_backward(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                      int64_t rows, int64_t dim, bool accumulate_dx);
// The floats of the scratch the backward takes (each block of rows' partial dw).
int64_t rmsnorm_backward_scratch_floats(int64_t rows, int64_t dim);

}  // namespace dtrain
