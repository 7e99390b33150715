// RMSNorm kernels (see rmsnorm.hpp): rows in parallel; the weight's gradient reduced in fixed row
// blocks, so the result does not depend on the thread count.
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/simd.hpp"

#include <algorithm>
#include <cmath>
#include "kernels/cpu/scratch.hpp"

namespace dtrain {

namespace {
constexpr int64_t kRmsnormRowBlock = 256;  // the backward's rows per block (each its own partial sums)
}  // namespace

int64_t rmsnorm_backward_scratch_floats(int64_t rows, int64_t dim) { return (rows + kRmsnormRowBlock - 1) / kRmsnormRowBlock * dim; }

DT_SIMD void rmsnorm_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t dim,
                             float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float rs = 1.0f / std::sqrt(ss / float(dim) + eps);
    float* yr = y + r * dim;
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * rs * w[i];
    rstd[r] = rs;
  }
}

// With x̂ = x·rstd and g = dy·w: dx = rstd · (g - x̂ · mean(g·x̂)), dw = Σ_rows dy·x̂.
DT_SIMD void rmsnorm_backward(const float* dy, const float* x, const float* w, const float* rstd, float* dx,
                              float* dw, int64_t rows, int64_t dim, bool accumulate_dx) {
  if (rows <= 0 || dim <= 0) return;
  const int64_t blocks = (rows + kRmsnormRowBlock - 1) / kRmsnormRowBlock;
  float* part = scratch_zeroed(ScratchSlot::rmsnorm, rmsnorm_backward_scratch_floats(rows, dim));
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    float* pw = part + b * dim;
    const int64_t r1 = std::min(rows, (b + 1) * kRmsnormRowBlock);
    for (int64_t r = b * kRmsnormRowBlock; r < r1; ++r) {
      const float* xr = x + r * dim;
      const float* dyr = dy + r * dim;
      const float rs = rstd[r];
      float sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_gx)
      for (int64_t i = 0; i < dim; ++i) {
        const float xhat = xr[i] * rs;
        sum_gx += dyr[i] * w[i] * xhat;
        pw[i] += dyr[i] * xhat;
      }
      const float mgx = sum_gx / float(dim);
      float* dxr = dx + r * dim;
#pragma omp simd
      for (int64_t i = 0; i < dim; ++i) {
        const float v = (dyr[i] * w[i] - xr[i] * rs * mgx) * rs;
        dxr[i] = accumulate_dx ? dxr[i] + v : v;
      }
    }
  }
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < dim; ++i) dw[i] += part[b * dim + i];
}

}  // namespace dtrain
