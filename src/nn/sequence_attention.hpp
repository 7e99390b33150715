// Where a block's attention meets the rest of its sequences (DESIGN §3.7's regions, for context
// parallel): in one process a block runs the device's attention kernel over its rows and needs none
// of this; under context parallel a pass holds a share of every sequence's positions
// (StepContext::sequence), and src/parallel/cp implements this over the context-parallel group
// (ring attention, or all-to-all), and the sums a block takes over whole sequences (a mixture of
// experts' balance loss counts a sequence's tokens). Model code stays free of ranks and collectives.
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

class SequenceAttention {
 public:
  virtual ~SequenceAttention() = default;
  // A block of `heads` query and `kv_heads` key/value heads (its tensor-parallel slice's) checks it
  // can be split: ConfigError naming the fix otherwise.
  virtual void check_heads(int64_t /*heads*/, int64_t /*kv_heads*/) const {}
  // Memory it keeps between calls for its exchanges, in bytes (sized by the largest pass so far).
  virtual size_t buffer_bytes() const { return 0; }
  // Floats the block keeps per micro-batch between forward and backward for the attention of a pass
  // of shape s (beside its packed qkv rows and the attention's output): the ring's log-sum-exp per
  // query row and head, or the all-to-all's head-split rows of the whole sequences.
  virtual int64_t saved_floats(const AttentionShape& s) const = 0;
  // out [B * T, H * Dh] = attention of the pass's queries (qkv: this pass's packed rows, positions
  // `sequence`) to the keys of the whole sequences; `saved` is what backward will read. drop: the
  // probabilities' dropout as the block keys it over all heads (col_offset: its first head's).
  virtual void forward(const float* qkv, float* out, float* saved, const AttentionShape& s, const DropoutSpec& drop,
                       const SequenceShard& sequence) = 0;
  // v [n]: this share's partial sums over its positions, made the sums over the whole sequences
  // (in place; every share of the group calls it alike).
  virtual void sum_over_sequences(float* v, int64_t n) = 0;
  // dqkv [B * T, (H + 2K) * Dh] written: the gradient of forward's out (dout) with respect to qkv.
  virtual void backward(const float* dout, const float* qkv, const float* out, const float* saved, float* dqkv,
                        const AttentionShape& s, const DropoutSpec& drop, const SequenceShard& sequence) = 0;
};

}  // namespace dtrain
