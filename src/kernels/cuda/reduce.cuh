// Reductions the CUDA kernels share, each in a fixed order so that a result is the same every run: the
// sum over a warp's lanes, and column sums over fixed blocks of rows, the blocks then added in order.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"

namespace dtrain::cuda {

// Rows per block of the kernels that give each row one warp (LayerNorm, RMSNorm, attention's softmax).
constexpr int kWarps = 8;
// Rows per partial of the norms' parameter gradients (their column sums over the rows).
constexpr int kRowBlock = 128;

// v summed over the 32 lanes of a warp (lanes 16, 8, 4, 2, 1 apart in turn); every lane gets the sum.
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// part[b][c] = the sum, in row order, of term(r, c) over the rows r of block b: [b·kRows, (b+1)·kRows)
// (blockIdx.y = b; one thread per column c).
template <int kRows, class Term>
__global__ void colsum_partial_kernel(Term term, int64_t rows, int64_t cols, float* part) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const int64_t r0 = int64_t(blockIdx.y) * kRows, r1 = min(rows, r0 + kRows);
  float s = 0.0f;
  for (int64_t r = r0; r < r1; ++r) s += term(r, c);
  part[int64_t(blockIdx.y) * cols + c] = s;
}

// out[c] += the sum of part[b][c] over the blocks b in order (reduce.cu).
void colsum_finish(const float* part, int64_t blocks, int64_t cols, float* out, cudaStream_t s);

// out[c] += the sum over the rows r of term(r, c), a [rows, cols] matrix given by a functor with a
// __device__ operator()(int64_t r, int64_t c) -> float: the rows in blocks of kRows (each summed in
// row order), then the blocks' partials (kept in the pool's `slot`) in block order. rows, cols > 0.
template <int kRows, class Term>
void colsum_rows(const Term& term, int64_t rows, int64_t cols, float* out, ScratchPool& pool, Scratch slot,
                 cudaStream_t s) {
  const int64_t blocks = (rows + kRows - 1) / kRows;
  float* part = pool.get(slot, blocks * cols, s);
  const dim3 grid(unsigned((cols + 255) / 256), unsigned(blocks));
  colsum_partial_kernel<kRows><<<grid, 256, 0, s>>>(term, rows, cols, part);
  DT_CUDA_LAUNCHED();
  colsum_finish(part, blocks, cols, out, s);
}

}  // namespace dtrain::cuda
