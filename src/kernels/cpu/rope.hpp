// Rotary position embedding on the CPU, as Hugging Face's Llama applies it: the rotation, the angles and
// rope_inv_freq are described with RopeShape (kernels/types.hpp).
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// In place on the q and k parts of packed qkv [B*T, (heads + 2*kv_heads)*head_dim]; v untouched.
// head_dim must be even.
void rope_forward(float* qkv, const RopeShape& s);
// In place on the gradient in the same layout: the gradient through the rotation (the inverse
// rotation, its transpose); the v part untouched.
void rope_backward(float* dqkv, const RopeShape& s);
// The floats of the angle table either takes (a cosine and a sine per position and frequency).
inline int64_t rope_scratch_floats(const RopeShape& s) { return s.T * s.head_dim + s.head_dim / 2; }

}  // namespace dtrain
