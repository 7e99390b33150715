// Softmax cross-entropy rows of the fused classifier on the GPU: one block per row computes the
// row's loss and, in training, turns its logits into the loss gradient in place; in one pass, or
// in three (max, sums, losses) when a vocabulary slice combines its statistics with the others'.
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

// Block-wide statistics of one row l[0, V) (every thread gets the result).
__device__ float row_max(const float* l, int64_t V, float* sh) {
  float mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) mx = fmaxf(mx, l[v]);
  return block_reduce<true>(mx, sh);
}
__device__ float row_sum_exp(const float* l, int64_t V, float mx, float* sh) {
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) sum += __expf(l[v] - mx);
  return block_reduce<false>(sum, sh);
}

// The target's local column, or -1 when it lies outside the slice [v0, v0 + V).
__device__ int64_t local_target(int32_t target, int64_t V, int64_t v0) {
  const int64_t t = int64_t(target) - v0;
  return t >= 0 && t < V ? t : -1;
}

// l = grad_scale * (exp(l - mx) / sum - onehot(t)); t = -1: no onehot in this slice.
__device__ void write_gradient(float* l, int64_t V, float mx, float sum, int64_t t, float grad_scale) {
  const float k = grad_scale / sum;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) l[v] = __expf(l[v] - mx) * k - (v == t ? grad_scale : 0.0f);
}

__global__ void rows_kernel(float* logits, const int32_t* targets, float* losses, int64_t V, int64_t v0, bool grad,
                            float grad_scale) {
  __shared__ float sh[kThreads / 32];
  float* l = logits + int64_t(blockIdx.x) * V;
  const float mx = row_max(l, V, sh);
  const float sum = row_sum_exp(l, V, mx, sh);
  const int64_t t = local_target(targets[blockIdx.x], V, v0);
  const float lt = t >= 0 ? l[t] : 0.0f;
  __syncthreads();  // every thread has read l[t] before it changes
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(sum) + mx - lt;
  if (grad) write_gradient(l, V, mx, sum, t, grad_scale);
}

__global__ void max_kernel(const float* logits, float* mx, int64_t V) {
  __shared__ float sh[kThreads / 32];
  const float m = row_max(logits + int64_t(blockIdx.x) * V, V, sh);
  if (threadIdx.x == 0) mx[blockIdx.x] = m;
}

__global__ void sums_kernel(const float* logits, const int32_t* targets, const float* mx, float* st, int64_t V,
                            int64_t v0) {
  __shared__ float sh[kThreads / 32];
  const int64_t r = blockIdx.x;
  const float* l = logits + r * V;
  const float sum = row_sum_exp(l, V, mx[r], sh);
  if (threadIdx.x != 0) return;
  const int64_t t = local_target(targets[r], V, v0);
  st[2 * r] = sum;
  st[2 * r + 1] = t >= 0 ? l[t] : 0.0f;
}

__global__ void losses_kernel(float* logits, const int32_t* targets, const float* mx, const float* st, float* losses,
                              int64_t V, int64_t v0, bool grad, float grad_scale) {
  const int64_t r = blockIdx.x;
  const float m = mx[r], sum = st[2 * r];
  if (threadIdx.x == 0) losses[r] = logf(sum) + m - st[2 * r + 1];
  if (grad) write_gradient(logits + r * V, V, m, sum, local_target(targets[r], V, v0), grad_scale);
}
}  // namespace

void softmax_cross_entropy_rows(float* logits, const int32_t* targets, float* losses, int64_t n, int64_t V, int64_t v0,
                                bool grad, float grad_scale, cudaStream_t s) {
  if (n == 0) return;
  rows_kernel<<<unsigned(n), kThreads, 0, s>>>(logits, targets, losses, V, v0, grad, grad_scale);
  DT_CUDA_LAUNCHED();
}

void cross_entropy_row_max(const float* logits, float* mx, int64_t n, int64_t V, cudaStream_t s) {
  if (n == 0) return;
  max_kernel<<<unsigned(n), kThreads, 0, s>>>(logits, mx, V);
  DT_CUDA_LAUNCHED();
}

void cross_entropy_row_sums(const float* logits, const int32_t* targets, const float* mx, float* st, int64_t n,
                            int64_t V, int64_t v0, cudaStream_t s) {
  if (n == 0) return;
  sums_kernel<<<unsigned(n), kThreads, 0, s>>>(logits, targets, mx, st, V, v0);
  DT_CUDA_LAUNCHED();
}

void cross_entropy_row_losses(float* logits, const int32_t* targets, const float* mx, const float* st, float* losses,
                              int64_t n, int64_t V, int64_t v0, bool grad, float grad_scale, cudaStream_t s) {
  if (n == 0) return;
  losses_kernel<<<unsigned(n), kThreads, 0, s>>>(logits, targets, mx, st, losses, V, v0, grad, grad_scale);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
