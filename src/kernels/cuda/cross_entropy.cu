// Softmax cross-entropy rows of the fused classifier on the GPU: one block per row computes the
// row's loss and, in training, turns its logits into the loss gradient in place; in one pass, or
// in three (max, sums, losses) when a vocabulary slice combines its statistics with the others'.
// Only a row's first W logits are words; the rest pad the slice: left out of the max, the sum and
// target matching, and given a gradient of exactly 0. Rows whose target logit is the max may be counted.
#include <cfloat>

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

// Block-wide statistics of the words l[0, W) of one row (every thread gets the result). The max
// starts from -FLT_MAX as the CPU's does, so a slice without words gives -FLT_MAX and sum 0.
__device__ float row_max(const float* l, int64_t W, float* sh) {
  float mx = -FLT_MAX;
  for (int64_t v = threadIdx.x; v < W; v += kThreads) mx = fmaxf(mx, l[v]);
  return block_reduce<true>(mx, sh);
}
__device__ float row_sum_exp(const float* l, int64_t W, float mx, float* sh) {
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < W; v += kThreads) sum += __expf(l[v] - mx);
  return block_reduce<false>(sum, sh);
}

// The target's local column, or -1 when it is not one of the slice's words [v0, v0 + W).
__device__ int64_t local_target(int32_t target, int64_t W, int64_t v0) {
  const int64_t t = int64_t(target) - v0;
  return t >= 0 && t < W ? t : -1;
}

// Words v < W: l = grad_scale * (exp(l - mx) / sum - onehot(t)) (t = -1: no onehot in this slice);
// padding v in [W, V): 0.
__device__ void write_gradient(float* l, int64_t V, int64_t W, float mx, float sum, int64_t t, float grad_scale) {
  const float k = grad_scale / sum;
  for (int64_t v = threadIdx.x; v < V; v += kThreads)
    l[v] = v < W ? __expf(l[v] - mx) * k - (v == t ? grad_scale : 0.0f) : 0.0f;
}

__global__ void rows_kernel(float* logits, const int32_t* targets, float* losses, int64_t V, int64_t W, int64_t v0,
                            bool grad, float grad_scale, double* correct) {
  __shared__ float sh[kThreads / 32];
  float* l = logits + int64_t(blockIdx.x) * V;
  const float mx = row_max(l, W, sh);
  const float sum = row_sum_exp(l, W, mx, sh);
  const int64_t t = local_target(targets[blockIdx.x], W, v0);
  const float lt = t >= 0 ? l[t] : 0.0f;
  // right: the target is the first word with the highest logit (argmax's choice), so no earlier
  // word may tie with it (the condition is the same in every thread of the block)
  const bool top = correct && t >= 0 && lt >= mx;
  int tied_before = 0;
  if (top)
    for (int64_t v = threadIdx.x; v < t; v += kThreads) tied_before |= l[v] == mx;
  tied_before = __syncthreads_or(tied_before);  // also: every thread has read l[t] before it changes
  if (threadIdx.x == 0) {
    losses[blockIdx.x] = logf(sum) + mx - lt;
    if (top && !tied_before) atomicAdd(correct, 1.0);  // a count: exact in any order
  }
  if (grad) write_gradient(l, V, W, mx, sum, t, grad_scale);
}

__global__ void max_kernel(const float* logits, float* mx, int64_t V, int64_t W) {
  __shared__ float sh[kThreads / 32];
  const float m = row_max(logits + int64_t(blockIdx.x) * V, W, sh);
  if (threadIdx.x == 0) mx[blockIdx.x] = m;
}

__global__ void sums_kernel(const float* logits, const int32_t* targets, const float* mx, float* st, int64_t V,
                            int64_t W, int64_t v0) {
  __shared__ float sh[kThreads / 32];
  const int64_t r = blockIdx.x;
  const float* l = logits + r * V;
  const float sum = row_sum_exp(l, W, mx[r], sh);
  if (threadIdx.x != 0) return;
  const int64_t t = local_target(targets[r], W, v0);
  st[2 * r] = sum;
  st[2 * r + 1] = t >= 0 ? l[t] : 0.0f;
}

__global__ void losses_kernel(float* logits, const int32_t* targets, const float* mx, const float* st, float* losses,
                              int64_t V, int64_t W, int64_t v0, bool grad, float grad_scale, double* correct) {
  const int64_t r = blockIdx.x;
  const float m = mx[r], sum = st[2 * r];
  if (threadIdx.x == 0) {
    losses[r] = logf(sum) + m - st[2 * r + 1];
    // the combined target logit and max (across vocabulary slices a tie with the target counts as
    // right: the first of the tied words is not combined)
    if (correct && st[2 * r + 1] >= m) atomicAdd(correct, 1.0);
  }
  if (grad) write_gradient(logits + r * V, V, W, m, sum, local_target(targets[r], W, v0), grad_scale);
}
}  // namespace

void softmax_cross_entropy_rows(float* logits, const int32_t* targets, float* losses, int64_t n, int64_t V, int64_t W,
                                int64_t v0, bool grad, float grad_scale, double* correct, cudaStream_t s) {
  if (n == 0) return;
  rows_kernel<<<unsigned(n), kThreads, 0, s>>>(logits, targets, losses, V, W, v0, grad, grad_scale, correct);
  DT_CUDA_LAUNCHED();
}

void cross_entropy_row_max(const float* logits, float* mx, int64_t n, int64_t V, int64_t W, cudaStream_t s) {
  if (n == 0) return;
  max_kernel<<<unsigned(n), kThreads, 0, s>>>(logits, mx, V, W);
  DT_CUDA_LAUNCHED();
}

void cross_entropy_row_sums(const float* logits, const int32_t* targets, const float* mx, float* st, int64_t n,
                            int64_t V, int64_t W, int64_t v0, cudaStream_t s) {
  if (n == 0) return;
  sums_kernel<<<unsigned(n), kThreads, 0, s>>>(logits, targets, mx, st, V, W, v0);
  DT_CUDA_LAUNCHED();
}

void cross_entropy_row_losses(float* logits, const int32_t* targets, const float* mx, const float* st, float* losses,
                              int64_t n, int64_t V, int64_t W, int64_t v0, bool grad, float grad_scale,
                              double* correct, cudaStream_t s) {
  if (n == 0) return;
  losses_kernel<<<unsigned(n), kThreads, 0, s>>>(logits, targets, mx, st, losses, V, W, v0, grad, grad_scale,
                                                 correct);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
