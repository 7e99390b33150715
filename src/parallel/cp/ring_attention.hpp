// Ring attention (context parallel, DESIGN §5): each rank keeps its queries and passes the key/value
// block of its positions round the context-parallel group, cp steps, attending its queries to each
// block while the next is already in flight; partial results merge by their running maximum and
// sum of exponentials (kernels: ComputeDevice::attention_block_*). Backward passes the blocks round
// again, each with the gradient of its keys and values gathered on the way, which ends at its owner.
#pragma once
#include <vector>

#include "comm/process_group.hpp"
#include "kernels/device.hpp"
#include "nn/sequence_attention.hpp"
#include "parallel/cp/cp_stats.hpp"

namespace dtrain {

class RingAttention : public SequenceAttention {
 public:
  RingAttention(ProcessGroup& group, ComputeDevice& device) : group_(group), dev_(device) {}
  // The log-sum-exp of every query row and head: [B, H, T].
  int64_t saved_floats(const AttentionShape& s) const override { return s.B * s.H * s.T; }
  void forward(const float* qkv, float* out, float* saved, const AttentionShape& s, const DropoutSpec& drop,
               const SequenceShard& sequence) override;
  void backward(const float* dout, const float* qkv, const float* out, const float* saved, float* dqkv,
                const AttentionShape& s, const DropoutSpec& drop, const SequenceShard& sequence) override;
  size_t buffer_bytes() const override;
  CpStats& stats() { return stats_; }

 private:
  // The positions of the block that started at group rank `owner` (the same split as this rank's).
  SequenceShard block_of(const SequenceShard& mine, int owner) const;
  void size_buffers(const AttentionShape& s);
  WorkPtr send(const float* data, int64_t floats, uint32_t tag);
  WorkPtr recv(float* data, int64_t floats, uint32_t tag);
  void wait(const WorkPtr& w);

  ProcessGroup& group_;
  ComputeDevice& dev_;
  int64_t block_floats_ = 0;
  std::vector<float> kv_[2], dkv_[2], dkv_in_, stats_rows_, delta_;  // host memory: the CPU's kernels read it
  CpStats stats_;
};

}  // namespace dtrain
