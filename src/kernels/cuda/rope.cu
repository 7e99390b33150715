// Rotary position embedding on the GPU (contract: RopeShape, kernels/types.hpp). The frequencies are
// the CPU's own (rope_inv_freq, computed on the host and passed by value), so both rotate by the same
// float32 angles; cos and sin are CUDA's accurate sincosf (no fast math). One thread per pair
// (x_i, x_{i+hd/2}) of a q or k head.
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"

namespace dtrain::cuda {

namespace {

constexpr int kMaxHalf = 256;  // head_dim <= 512: the frequencies fit the kernel's parameters
struct Freqs {
  float inv[kMaxHalf];
};

__global__ void rope_kernel(float* x, int64_t n, int64_t T, int64_t rotated, int64_t half, int64_t width,
                            int64_t first_position, float sign, Freqs f) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  const int64_t i = k % half, h = (k / half) % rotated, r = k / (half * rotated);
  const float angle = float(first_position + r % T) * f.inv[i];
  float sn, c;
  sincosf(angle, &sn, &c);
  sn *= sign;
  float* a = x + r * width + h * 2 * half + i;
  const float ai = a[0], bi = a[half];
  a[0] = ai * c - bi * sn;
  a[half] = bi * c + ai * sn;
}

}  // namespace

void rope(float* qkv, const RopeShape& shape, bool inverse, cudaStream_t s) {
  DT_ASSERT(shape.head_dim > 0 && shape.head_dim % 2 == 0 && shape.head_dim / 2 <= kMaxHalf);
  DT_ASSERT(shape.heads > 0 && shape.kv() > 0 && shape.B >= 0 && shape.T >= 0);
  const int64_t half = shape.head_dim / 2, rotated = shape.heads + shape.kv();
  const int64_t n = shape.B * shape.T * rotated * half;
  if (n == 0) return;
  Freqs f{};
  for (int64_t i = 0; i < half; ++i) f.inv[i] = rope_inv_freq(i, shape.head_dim, shape.theta);
  rope_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(qkv, n, shape.T, rotated, half, shape.row_width(),
                                                        shape.first_position, inverse ? -1.0f : 1.0f, f);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
