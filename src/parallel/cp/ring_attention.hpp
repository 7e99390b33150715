// Ring attention (context parallel, DESIGN §5): each rank keeps its queries and passes the key/value
// block of its positions round the context-parallel group, cp steps, attending its queries to each
// block while the next is already in flight; partial results merge by their running maximum and
// sum of exponentials (kernels: ComputeDevice::attention_block_*). Backward passes the blocks round
// again, each with the gradient of its keys and values gathered on the way, which ends at its owner.
#pragma once
#include <vector>

#include "parallel/cp/context_attention.hpp"

namespace dtrain {

class RingAttention : public ContextAttention {
 public:
  using ContextAttention::ContextAttention;
  // The log-sum-exp of every query row and head: [B, H, T].
  int64_t saved_floats(const AttentionShape& s) const override { return s.B * s.H * s.T; }
  void forward(const float* qkv, float* out, float* saved, const AttentionShape& s, const DropoutSpec& drop,
               const SequenceShard& sequence) override;
  void backward(const float* dout, const float* qkv, const float* out, const float* saved, float* dqkv,
                const AttentionShape& s, const DropoutSpec& drop, const SequenceShard& sequence) override;
  size_t buffer_bytes() const override {
    return bytes_of({&kv_[0], &kv_[1], &dkv_[0], &dkv_[1], &dkv_in_, &stats_rows_, &delta_});
  }

 private:
  void size_buffers(const AttentionShape& s);
  WorkPtr send(const float* data, int64_t floats, uint32_t tag);
  WorkPtr recv(float* data, int64_t floats, uint32_t tag);
  void wait(const WorkPtr& w);

  int64_t block_floats_ = 0;
  std::vector<float> kv_[2], dkv_[2], dkv_in_, stats_rows_, delta_;
};

}  // namespace dtrain
