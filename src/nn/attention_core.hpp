// A block's attention core, shared by the model kinds: the context of a pass's queries, by the
// device's kernel over whole sequences or (context parallel) by SequenceAttention, written in the
// type the block keeps it in.
#pragma once

#include "kernels/device.hpp"
#include "nn/layers.hpp"
#include "nn/sequence_attention.hpp"

namespace dtrain {

// ctx [rows, H·Dh] = attention(qkv); probs: what the device's kernel keeps for backward, saved:
// what context parallel's keeps (qkv f32 then). A context kept in bf16 (only the output projection reads it) goes
// through `staging` [rows, H·Dh] (write_activation); under context parallel it must be f32 (its
// backward reads it).
inline void attention_context(ComputeDevice& dev, SequenceAttention* sequence, Operand qkv, ActBuffer ctx,
                              ActBuffer probs, float* saved, const AttentionShape& s, const DropoutSpec& drop,
                              const SequenceShard& shard, float* staging) {
  if (sequence) {
    sequence->forward(qkv.f32(), ctx.f32(), saved, s, drop, shard);
    return;
  }
  write_activation(dev, ctx, staging, s.B * s.T * s.H * s.Dh,
                   [&](float* out) { dev.attention_forward(qkv, out, probs, s, drop); });
}

}  // namespace dtrain
