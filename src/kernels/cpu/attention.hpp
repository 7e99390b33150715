// Multi-head scaled dot-product attention (causal or unmasked) with dropout on the probabilities,
// and its grouped-query form, on the CPU; the qkv layout is AttentionShape's (kernels/types.hpp).
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// out [B*T, H*Dh]; probs [B, H, T, T] saved for backward (softmax before dropout), per query head,
// and dropout's mask keys are per query head: element (h*T + t)*T + j of sample b. With out null it
// computes probs only (selective recompute: the same bits again, for attention_backward).
void attention_forward(const float* qkv, float* out, float* probs, const AttentionShape& s,
                       const DropoutSpec& drop);
// dqkv [B*T, row_width()] is overwritten, in qkv's layout; a kv head's dk and dv are the sums over
// the query heads of its group.
void attention_backward(const float* dout, const float* qkv, const float* probs, float* dqkv,
                        const AttentionShape& s, const DropoutSpec& drop);
// The floats of one [B, H, T, T] scratch the two take (the dropped probabilities, their gradient).
inline int64_t attention_scores_floats(const AttentionShape& s) { return s.B * s.H * s.T * s.T; }

}  // namespace dtrain
