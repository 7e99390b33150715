// Context parallel's all-to-all form (DeepSpeed's Ulysses): before attention one all-to-all turns
// this rank's share of every sequence's positions, all heads, into every rank's positions of this
// rank's share of the heads (cp divides the heads and the kv heads); the attention of those heads
// over whole sequences runs as cp × cp blocks (each rank's positions against each's, the ring's
// block kernels, so no probabilities of whole sequences are ever held), and a second all-to-all
// returns the output to the positions' ranks. Backward runs the same exchanges the other way (and a
// small one of the rows' delta). It keeps the exchanged rows (as many floats as the pass's own qkv)
// and the log-sum-exp of each row and head.
#pragma once
#include <vector>

#include "parallel/cp/context_attention.hpp"

namespace dtrain {

class AllToAllAttention : public ContextAttention {
 public:
  using ContextAttention::ContextAttention;
  // The exchanged rows [cp][B·T][(H + 2K)/cp · Dh], then the log-sum-exp [cp][B][H/cp][T].
  int64_t saved_floats(const AttentionShape& s) const override { return s.B * s.T * (s.row_width() + s.H); }
  void check_heads(int64_t heads, int64_t kv_heads) const override;
  void forward(const float* qkv, float* out, float* saved, const AttentionShape& s, const DropoutSpec& drop,
               const SequenceShard& sequence) override;
  void backward(const float* dout, const float* qkv, const float* out, const float* saved, float* dqkv,
                const AttentionShape& s, const DropoutSpec& drop, const SequenceShard& sequence) override;
  size_t buffer_bytes() const override { return bytes_of({&send_, &recv_, &kv_, &dkv_, &stats_rows_, &delta_}); }

 private:
  AttentionShape share(const AttentionShape& s) const;  // this rank's heads, one rank's positions
  DropoutSpec heads_of(const DropoutSpec& drop, const AttentionShape& w, int64_t L) const;
  void exchange(float* send, float* recv, int64_t floats_per_rank);
  // Every rank's positions' keys and values of this rank's heads, packed as blocks.
  void pack_blocks(const float* rows, const AttentionShape& w);

  std::vector<float> send_, recv_, kv_, dkv_, stats_rows_, delta_;
};

}  // namespace dtrain
