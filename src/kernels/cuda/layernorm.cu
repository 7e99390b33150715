// LayerNorm on the GPU: one warp per row; parameter gradients as fixed row-block partials summed
// in order (the same result every run).
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"
#include "kernels/cuda/reduce.cuh"

namespace dtrain::cuda {

namespace {
__global__ void forward_kernel(const float* x, const float* g, const float* b, float* y, float* mean, float* rstd,
                               int64_t rows, int64_t dim, float eps) {
  const int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const float* xr = x + r * dim;
  float s = 0.0f;
  for (int64_t i = lane; i < dim; i += 32) s += xr[i];
  const float m = warp_sum(s) / float(dim);
  float v = 0.0f;
  for (int64_t i = lane; i < dim; i += 32) v += (xr[i] - m) * (xr[i] - m);
  const float rs = rsqrtf(warp_sum(v) / float(dim) + eps);
  float* yr = y + r * dim;
  for (int64_t i = lane; i < dim; i += 32) yr[i] = (xr[i] - m) * rs * g[i] + b[i];
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = rs;
  }
}

__global__ void backward_dx_kernel(const float* dy, const float* x, const float* g, const float* mean,
                                   const float* rstd, float* dx, int64_t rows, int64_t dim, bool accumulate) {
  const int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const float* xr = x + r * dim;
  const float* dyr = dy + r * dim;
  const float m = mean[r], rs = rstd[r];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t i = lane; i < dim; i += 32) {
    const float gi = dyr[i] * g[i];
    sg += gi;
    sgx += gi * (xr[i] - m) * rs;
  }
  const float mg = warp_sum(sg) / float(dim), mgx = warp_sum(sgx) / float(dim);
  float* dxr = dx + r * dim;
  for (int64_t i = lane; i < dim; i += 32) {
    const float v = (dyr[i] * g[i] - mg - (xr[i] - m) * rs * mgx) * rs;
    dxr[i] = accumulate ? dxr[i] + v : v;
  }
}

// part[block][0..dim) = Σ dy·x̂, part[block][dim..2dim) = Σ dy over the block's rows
__global__ void backward_params_partial(const float* dy, const float* x, const float* mean, const float* rstd,
                                        int64_t rows, int64_t dim, float* part) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= dim) return;
  const int64_t r0 = int64_t(blockIdx.y) * kRowBlock, r1 = min(rows, r0 + kRowBlock);
  float sg = 0.0f, sb = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const float d = dy[r * dim + i];
    sg += d * (x[r * dim + i] - mean[r]) * rstd[r];
    sb += d;
  }
  part[int64_t(blockIdx.y) * 2 * dim + i] = sg;
  part[int64_t(blockIdx.y) * 2 * dim + dim + i] = sb;
}

__global__ void backward_params_finish(const float* part, int64_t blocks, int64_t dim, float* dg, float* db) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= dim) return;
  float sg = 0.0f, sb = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    sg += part[b * 2 * dim + i];
    sb += part[b * 2 * dim + dim + i];
  }
  dg[i] += sg;
  db[i] += sb;
}
}  // namespace

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                       int64_t rows, int64_t dim, float eps, cudaStream_t s) {
  if (rows == 0) return;
  forward_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(x, gamma, beta, y, mean, rstd, rows,
                                                                              dim, eps);
  DT_CUDA_LAUNCHED();
}

void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                        float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t dim, bool accumulate_dx,
                        ScratchPool& pool, cudaStream_t s) {
  if (rows == 0) return;
  backward_dx_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(dy, x, gamma, mean, rstd, dx,
                                                                                  rows, dim, accumulate_dx);
  DT_CUDA_LAUNCHED();
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  float* part = pool.get(Scratch::layernorm, blocks * 2 * dim, s);
  const unsigned col_blocks = unsigned((dim + 255) / 256);
  backward_params_partial<<<dim3(col_blocks, unsigned(blocks)), 256, 0, s>>>(dy, x, mean, rstd, rows, dim, part);
  DT_CUDA_LAUNCHED();
  backward_params_finish<<<col_blocks, 256, 0, s>>>(part, blocks, dim, dgamma, dbeta);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
