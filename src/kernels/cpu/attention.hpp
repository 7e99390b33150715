// Multi-head scaled dot-product attention (causal or unmasked) with dropout on the probabilities,
// and its grouped-query form, on the CPU; the qkv layout is AttentionShape's (kernels/types.hpp).
#pragma once
#include <cstdint>

#include "kernels/cpu/matmul.hpp"
#include "kernels/types.hpp"

namespace dtrain {

// out [B*T, H*Dh]; probs [B, H, T, T] saved for backward (softmax before dropout), per query head,
// and dropout's mask keys are per query head: element (h*T + t)*T + j of sample b. With out null it
// computes probs only (selective recompute: the same bits again, for attention_backward).
// In bf16 (attention_in_bf16): bf16 products, f32 softmax; probs stored in bf16 are rounded from
// the f32 softmax, and dropout and backward read the rounded values.
void attention_forward(Operand qkv, float* out, ActBuffer probs, const AttentionShape& s, const DropoutSpec& drop);
// dqkv [B*T, row_width()] is overwritten, in qkv's layout; a kv head's dk and dv are the sums over
// the query heads of its group.
void attention_backward(const float* dout, Operand qkv, Operand probs, float* dqkv, const AttentionShape& s,
                        const DropoutSpec& drop);
// Whether the two compute their products in bf16: s.precision = bf16, or qkv or probs stored in bf16
// (which only a CPU with bf16 products may do), as a bf16 operand makes any product bf16.
// bf16_products: whether the CPU has them (the planner asks for a CPU other than this one); without
// it, this CPU is asked where s.precision is bf16.
bool attention_in_bf16(const AttentionShape& s, bool qkv_bf16, bool probs_bf16, bool bf16_products);
inline bool attention_in_bf16(const AttentionShape& s, bool qkv_bf16, bool probs_bf16) {
  return attention_in_bf16(s, qkv_bf16, probs_bf16, bf16_products_for(s.precision));
}
// The floats of one [B, H, T, T] scratch the two take (the dropped probabilities, their gradient;
// in bf16 also the scores before a softmax stored in bf16).
inline int64_t attention_scores_floats(const AttentionShape& s) { return s.B * s.H * s.T * s.T; }

}  // namespace dtrain
