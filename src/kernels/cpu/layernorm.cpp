// LayerNorm kernels (see layernorm.hpp); parameter gradients reduced in fixed row blocks so the
// result does not depend on the thread count.
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/simd.hpp"

#include <algorithm>
#include <cmath>
#include "kernels/cpu/scratch.hpp"

namespace dtrain {

namespace {
constexpr int64_t kLayernormRowBlock = 256;  // the backward's rows per block (each its own partial sums)
}  // namespace

int64_t layernorm_backward_scratch_floats(int64_t rows, int64_t dim) {
  return (rows + kLayernormRowBlock - 1) / kLayernormRowBlock * 2 * dim;
}

DT_SIMD void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                       float* rstd, int64_t rows, int64_t dim, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < dim; ++i) s += xr[i];
    const float m = s / float(dim);
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int64_t i = 0; i < dim; ++i) v += (xr[i] - m) * (xr[i] - m);
    const float rs = 1.0f / std::sqrt(v / float(dim) + eps);
    float* yr = y + r * dim;
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] - m) * rs * gamma[i] + beta[i];
    mean[r] = m;
    rstd[r] = rs;
  }
}

DT_SIMD void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                        const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                        int64_t dim, bool accumulate_dx) {
  const int64_t blocks = (rows + kLayernormRowBlock - 1) / kLayernormRowBlock;
  float* part = scratch_zeroed(ScratchSlot::layernorm, layernorm_backward_scratch_floats(rows, dim));
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    float* pg = part + b * 2 * dim;
    float* pb = pg + dim;
    const int64_t r1 = std::min(rows, (b + 1) * kLayernormRowBlock);
    for (int64_t r = b * kLayernormRowBlock; r < r1; ++r) {
      const float* xr = x + r * dim;
      const float* dyr = dy + r * dim;
      const float m = mean[r], rs = rstd[r];
      float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (int64_t i = 0; i < dim; ++i) {
        const float xhat = (xr[i] - m) * rs;
        const float g = dyr[i] * gamma[i];
        sum_g += g;
        sum_gx += g * xhat;
        pg[i] += dyr[i] * xhat;
        pb[i] += dyr[i];
      }
      const float mg = sum_g / float(dim), mgx = sum_gx / float(dim);
      float* dxr = dx + r * dim;
#pragma omp simd
      for (int64_t i = 0; i < dim; ++i) {
        const float xhat = (xr[i] - m) * rs;
        const float v = (dyr[i] * gamma[i] - mg - xhat * mgx) * rs;
        dxr[i] = accumulate_dx ? dxr[i] + v : v;
      }
    }
  }
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < dim; ++i) {
      dgamma[i] += part[b * 2 * dim + i];
      dbeta[i] += part[b * 2 * dim + dim + i];
    }
}

}  // namespace dtrain
