// Rotary position embedding (see rope.hpp): a table of cos and sin per position of the call and
// frequency, then every q and k head of every row rotated in place, rows in parallel (each
// element is computed alone: the result does not depend on the thread count).
#include "kernels/cpu/rope.hpp"

#include <cmath>

#include "core/error.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {

namespace {

void check_shape(const RopeShape& s) {
  DT_ASSERT(s.head_dim > 0 && s.head_dim % 2 == 0);
  DT_ASSERT(s.heads > 0 && s.kv() > 0 && s.B >= 0 && s.T >= 0);
}

// cs[t * hd + i] = cos, cs[t * hd + half + i] = sin of position first_position + t (context parallel:
// of the shard's t-th position), frequency i.
const float* angle_table(const RopeShape& s) {
  const int64_t half = s.head_dim / 2;
  float* cs = scratch(ScratchSlot::rope, rope_scratch_floats(s));
  float* inv = cs + s.T * s.head_dim;
  for (int64_t i = 0; i < half; ++i) inv[i] = rope_inv_freq(i, s.head_dim, s.theta);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < s.T; ++t) {
    const float p = float(s.first_position + s.sequence.position(t));
    float* row = cs + t * s.head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float angle = p * inv[i];
      row[i] = std::cos(angle);
      row[half + i] = std::sin(angle);
    }
  }
  return cs;
}

// Forward: (a, b) -> (a c - b s, b c + a s); inverse (the transpose): (a, b) -> (a c + b s, b c - a s).
DT_SIMD void rotate(float* x, const RopeShape& s, bool inverse) {
  check_shape(s);
  const int64_t rows = s.B * s.T;
  if (rows == 0) return;
  const float* cs = angle_table(s);
  const int64_t hd = s.head_dim, half = hd / 2, width = s.row_width(), rotated = s.heads + s.kv();
  const float sign = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* c = cs + (r % s.T) * hd;
    const float* sn = c + half;
    for (int64_t h = 0; h < rotated; ++h) {
      float* a = x + r * width + h * hd;
      float* b = a + half;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float ai = a[i], bi = b[i], si = sign * sn[i];
        a[i] = ai * c[i] - bi * si;
        b[i] = bi * c[i] + ai * si;
      }
    }
  }
}

}  // namespace

void rope_forward(float* qkv, const RopeShape& s) { rotate(qkv, s, false); }
void rope_backward(float* dqkv, const RopeShape& s) { rotate(dqkv, s, true); }

}  // namespace dtrain
