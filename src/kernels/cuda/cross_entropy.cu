// Softmax cross-entropy rows of the fused classifier on the GPU: one block per row computes the
// row's loss and, in training, turns its logits into the loss gradient in place.
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"

namespace dtrain::cuda {

namespace {
constexpr int kThreads = 256;

template <bool kMax>
__device__ float block_reduce(float v, float* sh) {
  for (int o = 16; o > 0; o /= 2) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, u) : v + u;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // sh may still be read from the previous reduction
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? sh[lane] : (kMax ? -INFINITY : 0.0f);
  for (int o = 16; o > 0; o /= 2) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, u) : v + u;
  }
  return v;
}

__global__ void rows_kernel(float* logits, const int32_t* targets, float* losses, int64_t V, bool grad,
                            float grad_scale) {
  __shared__ float sh[kThreads / 32];
  float* l = logits + int64_t(blockIdx.x) * V;
  float mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) mx = fmaxf(mx, l[v]);
  mx = block_reduce<true>(mx, sh);
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) sum += __expf(l[v] - mx);
  sum = block_reduce<false>(sum, sh);
  const int32_t tgt = targets[blockIdx.x];
  const float lt = l[tgt];
  __syncthreads();  // every thread has read l[tgt] before it changes
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(sum) + mx - lt;
  if (!grad) return;
  const float k = grad_scale / sum;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) l[v] = __expf(l[v] - mx) * k - (v == tgt ? grad_scale : 0.0f);
}
}  // namespace

void softmax_cross_entropy_rows(float* logits, const int32_t* targets, float* losses, int64_t n, int64_t V,
                                bool grad, float grad_scale, cudaStream_t s) {
  if (n == 0) return;
  rows_kernel<<<unsigned(n), kThreads, 0, s>>>(logits, targets, losses, V, grad, grad_scale);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
