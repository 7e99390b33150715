// RMSNorm on the GPU: one warp per row; the weight's gradient as fixed row-block partials summed in
// order (colsum_rows, reduce.cuh: the same result every run), as layernorm.cu does. The partials read
// dy before dx is written, so dx may be dy itself as on the CPU.
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"
#include "kernels/cuda/reduce.cuh"

namespace dtrain::cuda {

namespace {
__global__ void forward_kernel(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t dim,
                               float eps) {
  const int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const float* xr = x + r * dim;
  float ss = 0.0f;
  for (int64_t i = lane; i < dim; i += 32) ss += xr[i] * xr[i];
  const float rs = rsqrtf(warp_sum(ss) / float(dim) + eps);
  float* yr = y + r * dim;
  for (int64_t i = lane; i < dim; i += 32) yr[i] = xr[i] * rs * w[i];
  if (lane == 0) rstd[r] = rs;
}

// dx = rstd · (g - x̂ · mean(g·x̂)) with g = dy·w, x̂ = x·rstd
__global__ void backward_dx_kernel(const float* dy, const float* x, const float* w, const float* rstd, float* dx,
                                   int64_t rows, int64_t dim, bool accumulate) {
  const int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const float* xr = x + r * dim;
  const float* dyr = dy + r * dim;
  const float rs = rstd[r];
  float sgx = 0.0f;
  for (int64_t i = lane; i < dim; i += 32) sgx += dyr[i] * w[i] * (xr[i] * rs);
  const float mgx = warp_sum(sgx) / float(dim);
  float* dxr = dx + r * dim;
  for (int64_t i = lane; i < dim; i += 32) {
    const float v = (dyr[i] * w[i] - xr[i] * rs * mgx) * rs;
    dxr[i] = accumulate ? dxr[i] + v : v;
  }
}

// dy·x̂ at (r, i): the weight gradient's term, summed over the rows by colsum_rows
struct WeightGradTerm {
  const float* dy;
  const float* x;
  const float* rstd;
  int64_t dim;
  __device__ float operator()(int64_t r, int64_t i) const { return dy[r * dim + i] * (x[r * dim + i] * rstd[r]); }
};
}  // namespace

void rmsnorm_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t dim, float eps,
                     cudaStream_t s) {
  if (rows == 0) return;
  forward_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(x, w, y, rstd, rows, dim, eps);
  DT_CUDA_LAUNCHED();
}

void rmsnorm_backward(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                      int64_t rows, int64_t dim, bool accumulate_dx, ScratchPool& pool, cudaStream_t s) {
  if (rows == 0 || dim == 0) return;
  colsum_rows<kRowBlock>(WeightGradTerm{dy, x, rstd, dim}, rows, dim, dw, pool, Scratch::rmsnorm, s);
  backward_dx_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(dy, x, w, rstd, dx, rows, dim,
                                                                                  accumulate_dx);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
