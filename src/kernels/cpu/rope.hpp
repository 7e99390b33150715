// Rotary position embedding as Hugging Face's Llama applies it ("rotate half": dimension i of a head
// pairs with i + hd/2): for position p and i < hd/2, angle = p * theta^(-2i/hd);
// (x_i, x_{i+hd/2}) -> (x_i cos - x_{i+hd/2} sin, x_{i+hd/2} cos + x_i sin).
//
// The angles are computed as Hugging Face computes them, in float32, so that a model trained there
// sees the same rotations here (tests/unit/test_rope.cpp compares with torch: within 1.2e-7 at
// positions up to 4097):
//   inv_freq[i] = 1 / theta^(float(2i) / hd)   (the power rounded to float32, then the reciprocal
//                                               in float32: torch's float32 pow and division)
//   angle       = float(p) * inv_freq[i]        (one float32 product)
//   cos, sin    of that float32 angle
// At large positions the float32 angle is off the exact p * theta^(-2i/hd) by its rounding, up to
// about an ulp of the angle (angle * 1e-7 radians), and that error is what the reference model was
// trained with: exact (double) angles would differ from Hugging Face by it, so they are not used.
#pragma once
#include <cmath>
#include <cstdint>

namespace dtrain {

struct RopeShape {
  int64_t B = 0, T = 0;                           // rows are B*T, row r at position first_position + r % T
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // the packed [q | k | v] layout of grouped-query
                                                  // attention (kernels/cpu/attention.hpp); kv_heads 0: = heads
  float theta = 10000.0f;
  int64_t first_position = 0;
  int64_t kv() const { return kv_heads ? kv_heads : heads; }
  int64_t row_width() const { return (heads + 2 * kv()) * head_dim; }
};

// Hugging Face's inv_freq[i] for i < head_dim / 2 (see above), for the CPU and CUDA kernels alike
// (inline: the CUDA plugin computes it on the host and does not link the CPU kernels). torch takes
// theta ** (float(2i) / hd) as a float32 power; this is the correctly rounded float32 of the power
// (a double power, rounded once), which torch's float32 pow (SLEEF on the CPU, within 1 ulp) nearly
// always gives: against torch 1.13 every entry agrees for head_dim 64 and 128 at theta 1e4 and 5e5,
// and over other head sizes and thetas about 1 entry in 140 is 1 ulp apart (then angles far along
// the sequence can differ from torch's by an ulp of the angle).
inline float rope_inv_freq(int64_t i, int64_t head_dim, float theta) {
  const float e = float(2 * i) / float(head_dim);
  const float power = float(std::pow(double(theta), double(e)));
  return 1.0f / power;
}

// In place on the q and k parts of packed qkv [B*T, (heads + 2*kv_heads)*head_dim]; v untouched.
// head_dim must be even.
void rope_forward(float* qkv, const RopeShape& s);
// In place on the gradient in the same layout: the gradient through the rotation (the inverse
// rotation, its transpose); the v part untouched.
void rope_backward(float* dqkv, const RopeShape& s);

}  // namespace dtrain
