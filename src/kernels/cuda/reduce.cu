// Fixed-order reductions on the GPU (sums of squares, sums, column sums) and the scratch pool: the
// grid shape does not depend on timing, so a result is the same every run.
#include <cuda_bf16.h>

#include "core/limits.hpp"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"
#include "kernels/cuda/reduce.cuh"

namespace dtrain::cuda {

ScratchPool::~ScratchPool() {
  for (void* p : ptr_)
    if (p) cudaFree(p);
}

float* ScratchPool::get(Scratch slot, int64_t n, cudaStream_t s) {
  const int i = int(slot);
  if (size_[i] < n) {
    if (ptr_[i]) {
      DT_CUDA(cudaStreamSynchronize(s));
      DT_CUDA(cudaFree(ptr_[i]));
    }
    ptr_[i] = nullptr;
    size_[i] = 0;
    const size_t bytes = sizeof(float) * size_t(n);
    const cudaError_t e = cudaMalloc(&ptr_[i], bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      ptr_[i] = nullptr;
      throw AllocationFailed(std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB of GPU scratch");
    }
    DT_CUDA(e);
    size_[i] = n;
  }
  return static_cast<float*>(ptr_[i]);
}

size_t ScratchPool::bytes() const {
  size_t b = 0;
  for (int64_t n : size_) b += sizeof(float) * size_t(n);
  return b;
}

namespace {
constexpr int kThreads = 256;
constexpr int kBlocks = 256;     // partial sums of sumsq / sum
constexpr int kColsumRows = 256;  // rows per partial of colsum_accumulate

template <bool kSquare>
__global__ void partial_sums_kernel(const float* x, int64_t n, double* part) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < n; i += int64_t(kThreads) * gridDim.x)
    s += kSquare ? double(x[i]) * double(x[i]) : double(x[i]);
  sh[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

__global__ void finish_sum_kernel(const double* part, int n, double* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += part[i];
  *out += s;
}

// x[r, c] of a [rows, cols] matrix, f32 or bf16 (its bits), as colsum_rows' term.
__device__ inline float as_f32(float v) { return v; }
__device__ inline float as_f32(uint16_t b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
template <class T>
struct Element {
  const T* x;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const { return as_f32(x[r * cols + c]); }
};

__global__ void colsum_finish_kernel(const float* part, int64_t blocks, int64_t cols, float* out) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) s += part[b * cols + c];
  out[c] += s;
}

template <bool kSquare>
void blocked_sum(const float* x, int64_t n, double* out, ScratchPool& pool, cudaStream_t s) {
  if (n == 0) return;
  double* part = reinterpret_cast<double*>(pool.get(Scratch::reduce, 2 * kBlocks, s));
  partial_sums_kernel<kSquare><<<kBlocks, kThreads, 0, s>>>(x, n, part);
  DT_CUDA_LAUNCHED();
  finish_sum_kernel<<<1, 1, 0, s>>>(part, kBlocks, out);
  DT_CUDA_LAUNCHED();
}
}  // namespace

void sumsq(const float* x, int64_t n, double* out, ScratchPool& pool, cudaStream_t s) {
  blocked_sum<true>(x, n, out, pool, s);
}
void sum_into(const float* x, int64_t n, double* out, ScratchPool& pool, cudaStream_t s) {
  blocked_sum<false>(x, n, out, pool, s);
}

void colsum_finish(const float* part, int64_t blocks, int64_t cols, float* out, cudaStream_t s) {
  colsum_finish_kernel<<<unsigned((cols + kThreads - 1) / kThreads), kThreads, 0, s>>>(part, blocks, cols, out);
  DT_CUDA_LAUNCHED();
}

void colsum_accumulate(Operand x, float* out, int64_t rows, int64_t cols, ScratchPool& pool, cudaStream_t s) {
  if (rows == 0 || cols == 0) return;
  if (x.bf16)
    colsum_rows<kColsumRows>(Element<uint16_t>{x.b16(), cols}, rows, cols, out, pool, Scratch::colsum, s);
  else
    colsum_rows<kColsumRows>(Element<float>{x.f32(), cols}, rows, cols, out, pool, Scratch::colsum, s);
}

}  // namespace dtrain::cuda
