// Multi-head scaled dot-product attention (causal or unmasked) with dropout on the probabilities.
// qkv rows are [q | k | v], each d = H*Dh wide with head h at columns h*Dh..(h+1)*Dh-1.
#pragma once
#include <cstdint>

#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/matmul.hpp"

namespace dtrain {

struct AttentionShape {
  int64_t B, T, H, Dh;
  bool causal = true;
  Precision precision = Precision::f32;  // of the score and value products (the CPU runs them in f32)
};

// out [B*T, H*Dh]; probs [B, H, T, T] saved for backward (softmax before dropout).
void attention_forward(const float* qkv, float* out, float* probs, const AttentionShape& s,
                       const DropoutSpec& drop);
// dqkv [B*T, 3*H*Dh] is overwritten.
void attention_backward(const float* dout, const float* qkv, const float* probs, float* dqkv,
                        const AttentionShape& s, const DropoutSpec& drop);

}  // namespace dtrain
