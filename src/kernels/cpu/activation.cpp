// ReLU and tanh-GELU kernels (see activation.hpp).
#include "kernels/cpu/activation.hpp"

#include "core/bf16.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/cpu/simd.hpp"

#include <cmath>

namespace dtrain {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

#pragma omp declare simd notinbranch
inline float fast_tanh(float u) {
  u = u > 20.0f ? 20.0f : (u < -20.0f ? -20.0f : u);
  return 1.0f - 2.0f / (fast_exp(2.0f * u) + 1.0f);
}
}  // namespace

namespace {
template <class In>
DT_SIMD void activation_forward_from(Activation a, const In* x, float* y, int64_t n) {
  if (a == Activation::relu) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = as_f32(x[i]) > 0.0f ? as_f32(x[i]) : 0.0f;
  } else {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float v = as_f32(x[i]);
      y[i] = 0.5f * v * (1.0f + fast_tanh(kSqrt2OverPi * (v + kGeluC * v * v * v)));
    }
  }
}

template <class In, class Out>
DT_SIMD void activation_backward_from(Activation a, const In* x, const float* dy, Out* dx, int64_t n) {
  if (a == Activation::relu) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) store_as(dx + i, as_f32(x[i]) > 0.0f ? dy[i] : 0.0f);
  } else {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float v = as_f32(x[i]);
      float u = kSqrt2OverPi * (v + kGeluC * v * v * v);
      float t = fast_tanh(u);
      float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluC * v * v);
      store_as(dx + i, dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
    }
  }
}

template <class In, class Out>
DT_SIMD void relu_backward_from(const In* y, const float* dy, Out* dx, int64_t n, float scale) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) store_as(dx + i, as_f32(y[i]) > 0.0f ? dy[i] * scale : 0.0f);
}
}  // namespace

void activation_forward(Activation a, Operand x, float* y, int64_t n) {
  if (x.bf16)
    activation_forward_from(a, x.b16(), y, n);
  else
    activation_forward_from(a, x.f32(), y, n);
}

void activation_backward(Activation a, Operand x, const float* dy, ActBuffer dx, int64_t n) {
  with_stored_types(x, dx, [&](auto in, auto out) { activation_backward_from(a, in, dy, out, n); });
}

void relu_backward_from_output(Operand y, const float* dy, ActBuffer dx, int64_t n, float scale) {
  with_stored_types(y, dx, [&](auto in, auto out) { relu_backward_from(in, dy, out, n, scale); });
}

}  // namespace dtrain
