// Token + position embedding on the GPU, for the table's vocabulary slice. The token-table gradient
// adds rows with atomics (rows with the same token meet in any order: not bit-reproducible); the
// position gradient sums the batch in order.
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"

namespace dtrain::cuda {

namespace {
// wte's row for token w, or -1 when w lies outside the slice [begin, begin + count).
__device__ int64_t table_row(int32_t w, int64_t begin, int64_t count) {
  return w >= begin && w < begin + count ? int64_t(w) - begin : -1;
}

__global__ void forward_kernel(const int32_t* tokens, const float* wte, const float* pos, float* out, int64_t B,
                               int64_t T, int64_t d, int64_t begin, int64_t count) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= B * T * d) return;
  const int64_t r = i / d, c = i % d, w = table_row(tokens[r], begin, count);
  const float e = w >= 0 ? wte[w * d + c] : 0.0f;
  out[i] = pos ? e + pos[(r % T) * d + c] : e;
}
__global__ void token_grad_kernel(const int32_t* tokens, const float* dout, float* dwte, int64_t n, int64_t d,
                                  int64_t begin, int64_t count) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n * d) return;
  const int64_t w = table_row(tokens[i / d], begin, count);
  if (w >= 0) atomicAdd(dwte + w * d + i % d, dout[i]);
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
                       int64_t d, VocabRange range, cudaStream_t s) {
  const int64_t n = B * T * d;
  if (n == 0) return;
  forward_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(tokens, wte, pos, out, B, T, d, range.begin, range.count);
  DT_CUDA_LAUNCHED();
}

void embedding_backward(const int32_t* tokens, const float* dout, float* dwte, float* dpos, int64_t B, int64_t T,
                        int64_t d, VocabRange range, cudaStream_t s) {
  const int64_t n = B * T * d;
  if (n == 0) return;
  token_grad_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(tokens, dout, dwte, B * T, d, range.begin, range.count);
  DT_CUDA_LAUNCHED();
  if (!dpos) return;
  pos_grad_kernel<<<unsigned((T * d + 255) / 256), 256, 0, s>>>(dout, dpos, B, T, d);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
