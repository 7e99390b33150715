// Token + position embedding on the GPU. The token-table gradient adds rows with atomics (rows
// with the same token meet in any order: not bit-reproducible); the position gradient sums the
// batch in order.
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"

namespace dtrain::cuda {

namespace {
__global__ void forward_kernel(const int32_t* tokens, const float* wte, const float* pos, float* out, int64_t B,
                               int64_t T, int64_t d) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= B * T * d) return;
  const int64_t r = i / d, c = i % d;
  out[i] = wte[int64_t(tokens[r]) * d + c] + pos[(r % T) * d + c];
}
__global__ void token_grad_kernel(const int32_t* tokens, const float* dout, float* dwte, int64_t n, int64_t d) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n * d) return;
  atomicAdd(dwte + int64_t(tokens[i / d]) * d + i % d, dout[i]);
}
__global__ void pos_grad_kernel(const float* dout, float* dpos, int64_t B, int64_t T, int64_t d) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= T * d) return;
  float s = 0.0f;
  for (int64_t b = 0; b < B; ++b) s += dout[b * T * d + i];
  dpos[i] += s;
}
}  // namespace

void embedding_forward(const int32_t* tokens, const float* wte, const float* pos, float* out, int64_t B, int64_t T,
                       int64_t d, cudaStream_t s) {
  const int64_t n = B * T * d;
  if (n == 0) return;
  forward_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(tokens, wte, pos, out, B, T, d);
  DT_CUDA_LAUNCHED();
}

void embedding_backward(const int32_t* tokens, const float* dout, float* dwte, float* dpos, int64_t B, int64_t T,
                        int64_t d, cudaStream_t s) {
  const int64_t n = B * T * d;
  if (n == 0) return;
  token_grad_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(tokens, dout, dwte, B * T, d);
  DT_CUDA_LAUNCHED();
  if (!dpos) return;
  pos_grad_kernel<<<unsigned((T * d + 255) / 256), 256, 0, s>>>(dout, dpos, B, T, d);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
