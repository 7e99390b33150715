// Context parallel's all-to-all form (DeepSpeed's Ulysses): before attention one all-to-all turns
// this rank's share of every sequence's positions, all heads, into all positions of its share of
// the heads (cp divides the heads and the kv heads); the device's attention kernel runs over whole
// sequences of those heads, and a second all-to-all returns the output to the positions' ranks.
// Backward runs the same exchanges the other way. It keeps the head-split rows of the whole
// sequences (as many floats as the pass's own qkv) and computes the probabilities again in backward.
#pragma once
#include <vector>

#include "comm/process_group.hpp"
#include "kernels/device.hpp"
#include "nn/sequence_attention.hpp"
#include "parallel/cp/cp_stats.hpp"

namespace dtrain {

class AllToAllAttention : public SequenceAttention {
 public:
  AllToAllAttention(ProcessGroup& group, ComputeDevice& device) : group_(group), dev_(device) {}
  int64_t saved_floats(const AttentionShape& s) const override { return s.B * s.T * s.row_width(); }
  void check_heads(int64_t heads, int64_t kv_heads) const override;
  void forward(const float* qkv, float* out, float* saved, const AttentionShape& s, const DropoutSpec& drop,
               const SequenceShard& sequence) override;
  void backward(const float* dout, const float* qkv, const float* out, const float* saved, float* dqkv,
                const AttentionShape& s, const DropoutSpec& drop, const SequenceShard& sequence) override;
  size_t buffer_bytes() const override {
    return (send_.capacity() + recv_.capacity() + whole_out_.capacity() + probs_.capacity()) * sizeof(float);
  }
  CpStats& stats() { return stats_; }

 private:
  // The attention over whole sequences of this rank's heads (T the whole length).
  AttentionShape whole(const AttentionShape& s, const SequenceShard& sequence) const;
  DropoutSpec heads_of(const DropoutSpec& drop, const AttentionShape& w) const;  // this rank's heads among the slice's
  void exchange(float* send, float* recv, int64_t floats_per_rank);
  float* buffer(std::vector<float>& v, int64_t floats);

  ProcessGroup& group_;
  ComputeDevice& dev_;
  std::vector<float> send_, recv_, whole_out_, probs_;  // host memory: the CPU's kernels read it
  CpStats stats_;
};

}  // namespace dtrain
