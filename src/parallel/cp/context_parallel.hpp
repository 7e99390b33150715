// Context parallel as ParallelModel applies it (DESIGN §3.9, docs/distributed.md): the ranks of a
// context-parallel group see the same samples, each a share of every sequence's positions
// (sequence_split.hpp); a block's attention reaches the other shares through ring or all-to-all
// attention; the loss and its counts are summed over the group, the gradients reduced with the
// data-parallel ranks' (the mesh's dp_cp group).
#pragma once
#include <memory>
#include <string>

#include "comm/process_group.hpp"
#include "nn/context.hpp"
#include "parallel/cp/context_attention.hpp"
#include "parallel/cp/sequence_split.hpp"

namespace dtrain {

enum class CpMode { ring, alltoall };
CpMode cp_mode(const std::string& name);  // "ring" | "alltoall"
const char* cp_mode_name(CpMode m);

class ContextParallel {
 public:
  ContextParallel(ProcessGroup& group, CpMode mode, ComputeDevice& device);
  ~ContextParallel();
  int size() const { return group_.size(); }
  CpMode mode() const { return mode_; }
  SequenceAttention& attention() { return *attention_; }
  // A pass over whole samples as this rank runs it: T its share, `sequence` their positions.
  StepContext local(const StepContext& whole) const;
  // The batch's samples cut to the positions of `ctx` (a local() context); valid until the next call.
  BatchView local(const BatchView& whole, const StepContext& ctx) { return batch_.of(whole, ctx.sequence); }
  // Sums of the whole sequences from this rank's shares (in place, every rank of the group).
  void sum(double* v, size_t n) { group_.allreduce(v, n); }
  // Host memory kept for the exchanges (the attention's buffers, the cut batch), in bytes.
  size_t buffer_bytes() const { return attention_->buffer_bytes() + batch_.bytes(); }
  // The attention's traffic and waits since the last call.
  CpStats take_stats() { return attention_->take_stats(); }

 private:
  ProcessGroup& group_;
  CpMode mode_;
  std::unique_ptr<ContextAttention> attention_;
  ShardedBatch batch_;
};

}  // namespace dtrain
