// SwiGLU kernels (see swiglu.hpp). The sigmoid is formed from e = exp(-|g|) ≤ 1, so no exponential
// overflows at any |g|: sigmoid(g) = 1 / (1 + e) for g ≥ 0, e / (1 + e) below, and 1 - sigmoid(g)
// the other one (never 1 - s, which cancels for large g).
#include "kernels/cpu/swiglu.hpp"
#include "kernels/cpu/simd.hpp"

#include <bit>
#include <cmath>

#include "core/bf16.hpp"
#include "kernels/cpu/onednn.hpp"

namespace dtrain {

namespace {
// sigmoid(g) and 1 - sigmoid(g), inlined into the vector loops. fast_exp stops at e^-87; past it
// e is taken as 0 (the true value is below 2e-38), so silu(g) is -0 there, not g·e^-87.
inline void swiglu_sigmoid(float g, float& s, float& one_minus_s) {
  const float m = -std::fabs(g);
  const float e = m < -87.0f ? 0.0f : fast_exp(m);
  const float d = 1.0f / (1.0f + e);
  const float ed = e * d;
  s = g >= 0.0f ? d : ed;
  one_minus_s = g >= 0.0f ? ed : d;
}
}  // namespace

namespace {
inline float silu_times(float g, float u) {
  float s, sm;
  swiglu_sigmoid(g, s, sm);
  return g * s * u;
}

// One row: y[j] = silu(gate[j]) * up[j], the inputs f32 or bf16 (their bits), the output either.
template <class In, class Out>
inline void swiglu_row(const In* gate, const In* up, Out* y, int64_t f) {
#pragma omp simd
  for (int64_t j = 0; j < f; ++j) store_as(y + j, silu_times(as_f32(gate[j]), as_f32(up[j])));
}

template <class In, class Out>
DT_SIMD void swiglu_forward_rows(const In* a, Out* y, int64_t rows, int64_t f) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) swiglu_row(a + r * 2 * f, a + r * 2 * f + f, y + r * f, f);
}
}  // namespace

void swiglu_forward(Operand a, ActBuffer y, int64_t rows, int64_t f) {
  with_stored_types(a, y, [&](auto in, auto out) { swiglu_forward_rows(in, out, rows, f); });
}

// silu'(g) = s + g·s·(1 - s) = s · (1 + g·(1 - s)). In is float or uint16_t (bf16 bits).
template <class In, class Out>
DT_SIMD void swiglu_backward_from(const In* a, const float* dy, Out* da, int64_t rows, int64_t f) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const In* gate = a + r * 2 * f;
    const In* up = gate + f;
    const float* dyr = dy + r * f;
    Out* dgate = da + r * 2 * f;
    Out* dup = dgate + f;
#pragma omp simd
    for (int64_t j = 0; j < f; ++j) {
      const float g = as_f32(gate[j]), u = as_f32(up[j]);
      float s, sm;
      swiglu_sigmoid(g, s, sm);
      store_as(dgate + j, dyr[j] * u * (s * (1.0f + g * sm)));
      store_as(dup + j, dyr[j] * (g * s));
    }
  }
}

void swiglu_backward(Operand a, const float* dy, ActBuffer da, int64_t rows, int64_t f) {
  with_stored_types(a, da, [&](auto in, auto out) { swiglu_backward_from(in, dy, out, rows, f); });
}

}  // namespace dtrain
