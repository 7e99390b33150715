// Attention helpers on the GPU: moving heads between the row layout [B*T, H*Dh] and contiguous
// [B, H, T, Dh] blocks (so the four products per head are strided-batched cuBLASLt matmuls; the
// packed qkv rows may hold fewer kv heads K than query heads H, grouped-query attention), and
// the causal softmax rows with their backward (one warp per row).
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"
#include "kernels/cuda/reduce.cuh"

namespace dtrain::cuda {

namespace {
// element i of [B, H, T, Dh] ↔ (row b*T + t, column h*Dh + j) of a row layout `width` wide
__device__ int64_t row_index(int64_t i, int64_t T, int64_t H, int64_t Dh, int64_t width) {
  const int64_t j = i % Dh, t = (i / Dh) % T, h = (i / (Dh * T)) % H, b = i / (Dh * T * H);
  return (b * T + t) * width + h * Dh + j;
}
// q [B, H, T, Dh] and k, v [B, K, T, Dh] from qkv rows [q (H*Dh) | k (K*Dh) | v (K*Dh)]; n = B*H*T*Dh
// threads, the first nk = B*K*T*Dh of which also move k and v.
__global__ void split_kernel(const float* qkv, float* q, float* k, float* v, int64_t n, int64_t nk, int64_t T,
                             int64_t H, int64_t K, int64_t Dh) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t width = (H + 2 * K) * Dh;
  q[i] = qkv[row_index(i, T, H, Dh, width)];
  if (i >= nk) return;
  const int64_t src = row_index(i, T, K, Dh, width) + H * Dh;
  k[i] = qkv[src];
  v[i] = qkv[src + K * Dh];
}
__global__ void merge3_kernel(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n, int64_t nk,
                              int64_t T, int64_t H, int64_t K, int64_t Dh) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t width = (H + 2 * K) * Dh;
  dqkv[row_index(i, T, H, Dh, width)] = dq[i];
  if (i >= nk) return;
  const int64_t dst = row_index(i, T, K, Dh, width) + H * Dh;
  dqkv[dst] = dk[i];
  dqkv[dst + K * Dh] = dv[i];
}
__global__ void to_rows_kernel(const float* o, float* out, int64_t n, int64_t T, int64_t H, int64_t Dh) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) out[row_index(i, T, H, Dh, H * Dh)] = o[i];
}
__global__ void to_heads_kernel(const float* rows, float* o, int64_t n, int64_t T, int64_t H, int64_t Dh) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) o[i] = rows[row_index(i, T, H, Dh, H * Dh)];
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__global__ void softmax_kernel(float* p, int64_t rows, int64_t T, bool causal) {
  const int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  float* pr = p + r * T;
  const int64_t n = causal ? r % T + 1 : T;
  float mx = -INFINITY;
  for (int64_t j = lane; j < n; j += 32) mx = fmaxf(mx, pr[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int64_t j = lane; j < n; j += 32) sum += __expf(pr[j] - mx);
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t j = lane; j < T; j += 32) pr[j] = j < n ? __expf(pr[j] - mx) * inv : 0.0f;
}

__global__ void softmax_backward_kernel(const float* p, float* dp, int64_t rows, int64_t T) {
  const int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const float* pr = p + r * T;
  float* g = dp + r * T;
  float dot = 0.0f;
  for (int64_t j = lane; j < T; j += 32) dot += pr[j] * g[j];
  dot = warp_sum(dot);
  for (int64_t j = lane; j < T; j += 32) g[j] = pr[j] * (g[j] - dot);
}

inline unsigned blocks_for(int64_t n) { return unsigned((n + 255) / 256); }
}  // namespace

void split_heads(const float* qkv, float* q, float* k, float* v, int64_t B, int64_t T, int64_t H, int64_t K,
                 int64_t Dh, cudaStream_t s) {
  const int64_t n = B * H * T * Dh, nk = B * K * T * Dh;
  if (n == 0) return;
  split_kernel<<<blocks_for(n), 256, 0, s>>>(qkv, q, k, v, n, nk, T, H, K, Dh);
  DT_CUDA_LAUNCHED();
}
void merge_heads3(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t B, int64_t T, int64_t H,
                  int64_t K, int64_t Dh, cudaStream_t s) {
  const int64_t n = B * H * T * Dh, nk = B * K * T * Dh;
  if (n == 0) return;
  merge3_kernel<<<blocks_for(n), 256, 0, s>>>(dq, dk, dv, dqkv, n, nk, T, H, K, Dh);
  DT_CUDA_LAUNCHED();
}
void heads_to_rows(const float* o, float* out, int64_t B, int64_t T, int64_t H, int64_t Dh, cudaStream_t s) {
  const int64_t n = B * H * T * Dh;
  if (n == 0) return;
  to_rows_kernel<<<blocks_for(n), 256, 0, s>>>(o, out, n, T, H, Dh);
  DT_CUDA_LAUNCHED();
}
void rows_to_heads(const float* rows, float* o, int64_t B, int64_t T, int64_t H, int64_t Dh, cudaStream_t s) {
  const int64_t n = B * H * T * Dh;
  if (n == 0) return;
  to_heads_kernel<<<blocks_for(n), 256, 0, s>>>(rows, o, n, T, H, Dh);
  DT_CUDA_LAUNCHED();
}
void softmax_rows(float* p, int64_t rows, int64_t T, bool causal, cudaStream_t s) {
  if (rows == 0) return;
  softmax_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(p, rows, T, causal);
  DT_CUDA_LAUNCHED();
}
void softmax_backward_rows(const float* p, float* dp, int64_t rows, int64_t T, cudaStream_t s) {
  if (rows == 0) return;
  softmax_backward_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(p, dp, rows, T);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
