// Elementwise CUDA kernels: residual add, scaling, activations (SwiGLU included), dropout (the CPU's
// Philox masks, element for element) and the optimizer updates.
#include "core/philox.hpp"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"

namespace dtrain::cuda {

namespace {
constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
__global__ void scale_kernel(float* x, float f, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= f;
}
__global__ void to_bf16_kernel(const float* x, uint16_t* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
}
__global__ void from_bf16_kernel(const uint16_t* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = __bfloat162float(__ushort_as_bfloat16(x[i]));
}
__global__ void round_to_bf16_kernel(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}
// An activation's element as stored (f32, or bf16 rounded to nearest even), written and read.
__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(uint16_t* p, float v) { *p = __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
__device__ inline float load(const float* p) { return *p; }
__device__ inline float load(const uint16_t* p) { return __bfloat162float(__ushort_as_bfloat16(*p)); }
template <class In>
__global__ void act_forward_kernel(bool relu, const In* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = load(x + i);
  y[i] = relu ? (v > 0.0f ? v : 0.0f) : 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluC * v * v * v)));
}
template <class In, class Out>
__global__ void act_backward_kernel(bool relu, const In* x, const float* dy, Out* dx, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = load(x + i);
  if (relu) {
    store(dx + i, v > 0.0f ? dy[i] : 0.0f);
    return;
  }
  const float t = tanhf(kSqrt2OverPi * (v + kGeluC * v * v * v));
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluC * v * v);
  store(dx + i, dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
}

template <class In, class Out>
__global__ void relu_from_output_kernel(const In* y, const float* dy, Out* dx, int64_t n, float scale) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) store(dx + i, load(y + i) > 0.0f ? dy[i] * scale : 0.0f);
}

// sigmoid(g) and 1 - sigmoid(g) from e = exp(-|g|) ≤ 1, as kernels/cpu/swiglu.cpp forms them: no
// exponential overflows, and 1 - sigmoid is never 1 - s.
__device__ inline void swiglu_sigmoid(float g, float& s, float& one_minus_s) {
  const float e = expf(-fabsf(g));
  const float d = 1.0f / (1.0f + e);
  const float ed = e * d;
  s = g >= 0.0f ? d : ed;
  one_minus_s = g >= 0.0f ? ed : d;
}
// One thread per output element i = r·f + j: gate a[r·2f + j], up a[r·2f + f + j].
template <class In, class Out>
__global__ void swiglu_forward_kernel(const In* a, Out* y, int64_t rows, int64_t f) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= rows * f) return;
  const int64_t r = i / f, j = i - r * f;
  const float g = load(a + r * 2 * f + j), u = load(a + r * 2 * f + f + j);
  float s, sm;
  swiglu_sigmoid(g, s, sm);
  store(y + i, g * s * u);
}
// silu'(g) = s · (1 + g·(1 - s)); each thread reads its gate and up before writing them (da may be a).
template <class In, class Out>
__global__ void swiglu_backward_kernel(const In* a, const float* dy, Out* da, int64_t rows, int64_t f) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= rows * f) return;
  const int64_t r = i / f, j = i - r * f;
  const float g = load(a + r * 2 * f + j), u = load(a + r * 2 * f + f + j), d = dy[i];
  float s, sm;
  swiglu_sigmoid(g, s, sm);
  store(da + r * 2 * f + j, d * u * (s * (1.0f + g * sm)));
  store(da + r * 2 * f + f + j, d * (g * s));
}

// What a dropout kernel needs of a DropoutSpec: the stream's key and the tile's geometry.
struct DropoutKey {
  uint64_t seed;
  uint32_t a, b;  // the stream's purpose words (step; unit and site)
  int64_t sample_offset, sample_stride;
  int64_t rows_per_sample, row_offset, global_cols, col_offset;
  uint32_t threshold;
  float scale;
};

DropoutKey dropout_key(const DropoutSpec& d, int64_t cols) {
  return {d.seed, d.step, (d.unit << 8) | d.site, d.sample_offset, d.sample_stride, d.rows_per_sample,
          d.row_offset, d.global_cols > 0 ? d.global_cols : cols, d.col_offset, d.threshold(), d.scale()};
}

// Philox blocks a tile row may touch: cols elements starting anywhere in a block (up to 7 after its first).
inline int64_t dropout_blocks_per_row(int64_t cols) { return (cols + 7 + 7) / 8; }

// One thread per (tile row, Philox block of 8 elements). Tile row i is whole row g = row_offset + i,
// row g % rows_per_sample of sample g / rows_per_sample; its column c keys element
// e = (g % rows_per_sample) * global_cols + col_offset + c, which uses half (e & 1) of word
// ((e >> 1) & 3) of block e >> 3 of the sample's stream, as kernels/cpu/dropout.cpp does.
template <class Out>
__global__ void dropout_kernel(const float* x, Out* y, int64_t rows, int64_t cols, int64_t blocks_per_row,
                               DropoutKey k) {
  const int64_t job = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (job >= rows * blocks_per_row) return;
  const int64_t i = job / blocks_per_row, g = k.row_offset + i;
  const int64_t e0 = (g % k.rows_per_sample) * k.global_cols + k.col_offset;  // element of tile column 0
  const int64_t blk = (e0 >> 3) + job % blocks_per_row;
  const int64_t lo = blk * 8, hi = lo + 8;  // the block's elements, of which this row has [first, end)
  const int64_t first = lo > e0 ? lo : e0, end = hi < e0 + cols ? hi : e0 + cols;
  if (first >= end) return;  // past the row's last block
  const int64_t sample = g / k.rows_per_sample;
  uint32_t c[4] = {uint32_t(blk), uint32_t(uint64_t(blk) >> 32) ^ k.a, k.b,
                   uint32_t(k.sample_offset + sample * k.sample_stride)};
  philox10(c, uint32_t(k.seed), uint32_t(k.seed >> 32));
  const int64_t at = i * cols - e0;  // element e is at x[at + e]
  for (int64_t e = first; e < end; ++e) {
    const int j = int(e & 7);
    const uint32_t bits = (c[j >> 1] >> ((j & 1) * 16)) & 0xffffu;
    store(y + at + e, bits >= k.threshold ? x[at + e] * k.scale : 0.0f);
  }
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float beta1, float beta2,
                             float eps, float step_size, float bc2_sqrt, float decay) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float gi = g[i];
  float pi = p[i] * decay;
  const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
  const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  pi -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
  p[i] = pi;
}
__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, float lr, float momentum, float wd,
                           bool first) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float d = g[i] + wd * p[i];
  if (momentum != 0.0f) {
    buf[i] = first ? d : momentum * buf[i] + d;
    d = buf[i];
  }
  p[i] -= lr * d;
}
}  // namespace

void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, s>>>(a, b, out, n);
  DT_CUDA_LAUNCHED();
}
void scale(float* x, float f, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, f, n);
  DT_CUDA_LAUNCHED();
}
void to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  DT_CUDA_LAUNCHED();
}
void from_bf16(const uint16_t* x, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  from_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  DT_CUDA_LAUNCHED();
}
void round_to_bf16(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  round_to_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  DT_CUDA_LAUNCHED();
}
void activation_forward(Activation a, Operand x, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  if (x.bf16)
    act_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(a == Activation::relu, x.b16(), y, n);
  else
    act_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(a == Activation::relu, x.f32(), y, n);
  DT_CUDA_LAUNCHED();
}
void activation_backward(Activation a, Operand x, const float* dy, ActBuffer dx, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  with_stored_types(x, dx, [&](auto in, auto out) {
    act_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(a == Activation::relu, in, dy, out, n);
  });
  DT_CUDA_LAUNCHED();
}
void relu_backward_from_output(Operand y, const float* dy, ActBuffer dx, int64_t n, float scale, cudaStream_t s) {
  if (n == 0) return;
  with_stored_types(y, dx, [&](auto in, auto out) {
    relu_from_output_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, dy, out, n, scale);
  });
  DT_CUDA_LAUNCHED();
}
void swiglu_forward(Operand a, ActBuffer y, int64_t rows, int64_t f, cudaStream_t s) {
  if (rows * f == 0) return;
  with_stored_types(a, y, [&](auto in, auto out) {
    swiglu_forward_kernel<<<blocks_for(rows * f), kThreads, 0, s>>>(in, out, rows, f);
  });
  DT_CUDA_LAUNCHED();
}
void swiglu_backward(Operand a, const float* dy, ActBuffer da, int64_t rows, int64_t f, cudaStream_t s) {
  if (rows * f == 0) return;
  with_stored_types(a, da, [&](auto in, auto out) {
    swiglu_backward_kernel<<<blocks_for(rows * f), kThreads, 0, s>>>(in, dy, out, rows, f);
  });
  DT_CUDA_LAUNCHED();
}
void dropout(const float* x, ActBuffer y, int64_t rows, int64_t cols, const DropoutSpec& d, cudaStream_t s) {
  if (rows * cols == 0) return;
  if (!d.active()) {
    if (y.bf16)
      to_bf16(x, y.b16(), rows * cols, s);
    else if (x != y.data)
      DT_CUDA(cudaMemcpyAsync(y.data, x, sizeof(float) * rows * cols, cudaMemcpyDeviceToDevice, s));
    return;
  }
  const int64_t blocks_per_row = dropout_blocks_per_row(cols);
  const unsigned blocks = blocks_for(rows * blocks_per_row);
  if (y.bf16)
    dropout_kernel<<<blocks, kThreads, 0, s>>>(x, y.b16(), rows, cols, blocks_per_row, dropout_key(d, cols));
  else
    dropout_kernel<<<blocks, kThreads, 0, s>>>(x, y.f32(), rows, cols, blocks_per_row, dropout_key(d, cols));
  DT_CUDA_LAUNCHED();
}
void adamw(float* p, const float* g, float* m, float* v, int64_t n, const AdamWHyper& h, cudaStream_t s) {
  if (n == 0) return;
  const float bc1 = 1.0f - std::pow(h.beta1, float(h.step));
  const float bc2 = 1.0f - std::pow(h.beta2, float(h.step));
  adamw_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, g, m, v, n, h.beta1, h.beta2, h.eps, h.lr / bc1, std::sqrt(bc2),
                                                  1.0f - h.lr * h.weight_decay);
  DT_CUDA_LAUNCHED();
}
void sgd(float* p, const float* g, float* buf, int64_t n, const SgdHyper& h, cudaStream_t s) {
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, g, buf, n, h.lr, h.momentum, h.weight_decay, h.first_step);
  DT_CUDA_LAUNCHED();
}

}  // namespace dtrain::cuda
