// RMSNorm on the GPU: one warp per row; the weight's gradient as fixed row-block partials summed in
// order (the same result every run), as layernorm.cu does. The partials read dy before dx is
// written, so dx may be dy itself as on the CPU.
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"

namespace dtrain::cuda {

namespace {
constexpr int kWarps = 8;  // rows per block
constexpr int kRowBlock = 128;

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

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

// part[block][0..dim) = Σ dy·x̂ over the block's rows
__global__ void backward_w_partial(const float* dy, const float* x, const float* rstd, int64_t rows, int64_t dim,
                                   float* part) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= dim) return;
  const int64_t r0 = int64_t(blockIdx.y) * kRowBlock, r1 = min(rows, r0 + kRowBlock);
  float sw = 0.0f;
  for (int64_t r = r0; r < r1; ++r) sw += dy[r * dim + i] * (x[r * dim + i] * rstd[r]);
  part[int64_t(blockIdx.y) * dim + i] = sw;
}

__global__ void backward_w_finish(const float* part, int64_t blocks, int64_t dim, float* dw) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= dim) return;
  float sw = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) sw += part[b * dim + i];
  dw[i] += sw;
}
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
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  float* part = pool.get(Scratch::rmsnorm, blocks * dim, s);
  const unsigned col_blocks = unsigned((dim + 255) / 256);
  backward_w_partial<<<dim3(col_blocks, unsigned(blocks)), 256, 0, s>>>(dy, x, rstd, rows, dim, part);
  DT_CUDA_LAUNCHED();
  backward_w_finish<<<col_blocks, 256, 0, s>>>(part, blocks, dim, dw);
  DT_CUDA_LAUNCHED();
  backward_dx_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(dy, x, w, rstd, dx, rows, dim,
                                                                                  accumulate_dx);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
