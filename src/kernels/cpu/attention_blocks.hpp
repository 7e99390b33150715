// Ring attention's block kernels on the CPU (context parallel): a pass's queries attend to one block
// of keys and values at a time, merged flash-attention style; the contract is AttentionBlocks'
// (kernels/types.hpp). Results match attention_forward / attention_backward over the whole sequence
// to rounding, with the same dropout masks.
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// kv [B*T, 2*K*Dh]: row r is the k heads then the v heads of qkv row r.
void kv_block_pack(const float* qkv, float* kv, const AttentionShape& s);
// The k and v columns of dqkv row r = dkv row r's two halves; the q columns are untouched.
void kv_block_unpack(const float* dkv, float* dqkv, const AttentionShape& s);

// One block at positions `keys`: out [B*T, H*Dh] accumulates sum_j drop(exp(score - m)) · v_j and
// stats [B, H, T, 2] the running (m, l) of each query row (l sums the undropped exponentials);
// first: out and stats start here (not read). A row with no unmasked key in the block is unchanged
// (on the first block: m = -inf, l = 0, out = 0).
void attention_block_forward(const float* qkv, const float* kv, const SequenceShard& keys, float* out, float* stats,
                             const AttentionBlocks& a, const DropoutSpec& drop, bool first);
// After the last block: out /= l, lse [B, H, T] = m + log(l) (a row that saw no key: out 0, lse +inf).
void attention_blocks_finish(float* out, const float* stats, float* lse, const AttentionBlocks& a);
// delta [B, H, T] = the sum over each head's columns of dout ∘ out (out finished).
void attention_blocks_delta(const float* dout, const float* out, float* delta, const AttentionBlocks& a);
// One block's backward: the q columns of dqkv get dQ (first: written, else added), dkv [B*T, 2*K*Dh]
// (k half, v half) accumulates the block's dK and dV, summed over each kv head's query heads.
void attention_block_backward(const float* dout, const float* qkv, const float* kv, const SequenceShard& keys,
                              const float* lse, const float* delta, float* dqkv, float* dkv, const AttentionBlocks& a,
                              const DropoutSpec& drop, bool first);
// The floats of the scores scratch a block at `keys` takes (and, backward, their gradient's).
int64_t attention_block_scores_floats(const AttentionBlocks& a, const SequenceShard& keys);

}  // namespace dtrain
