// Multi-head scaled dot-product attention (causal or unmasked) with dropout on the probabilities,
// and its grouped-query form (GQA: fewer key/value heads than query heads).
// qkv rows are [q | k | v]: q is H*Dh wide with query head h at columns h*Dh..(h+1)*Dh-1, then k
// and v, each K*Dh wide (K = kv_heads, K = H by default) with kv head j at j*Dh.. within its part.
// Query head h attends with kv head h / (H/K); with K = H that is head h itself (plain multi-head).
#pragma once
#include <cstdint>

#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/matmul.hpp"

namespace dtrain {

struct AttentionShape {
  int64_t B, T, H, Dh;
  bool causal = true;
  Precision precision = Precision::f32;  // of the score and value products (the CPU runs them in f32)
  int64_t kv_heads = 0;                  // 0: = H. Otherwise K, 0 < K <= H, K divides H
  int64_t kv() const { return kv_heads ? kv_heads : H; }
  int64_t group() const { return H / kv(); }                // query heads per kv head
  int64_t row_width() const { return (H + 2 * kv()) * Dh; }  // of qkv and dqkv
};

// out [B*T, H*Dh]; probs [B, H, T, T] saved for backward (softmax before dropout), per query head,
// and dropout's mask keys are per query head: element (h*T + t)*T + j of sample b. With out null it
// computes probs only (selective recompute: the same bits again, for attention_backward).
void attention_forward(const float* qkv, float* out, float* probs, const AttentionShape& s,
                       const DropoutSpec& drop);
// dqkv [B*T, row_width()] is overwritten, in qkv's layout; a kv head's dk and dv are the sums over
// the query heads of its group.
void attention_backward(const float* dout, const float* qkv, const float* probs, float* dqkv,
                        const AttentionShape& s, const DropoutSpec& drop);

}  // namespace dtrain
