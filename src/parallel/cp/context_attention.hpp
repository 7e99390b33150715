// What ring and all-to-all attention share (context parallel): the cp group and the device, the
// traffic and waits they count (CpStats), and host buffers kept and grown between calls.
#pragma once
#include <initializer_list>
#include <utility>
#include <vector>

#include "comm/process_group.hpp"
#include "kernels/device.hpp"
#include "nn/sequence_attention.hpp"
#include "parallel/cp/cp_stats.hpp"
#include "parallel/cp/sequence_split.hpp"

namespace dtrain {

class ContextAttention : public SequenceAttention {
 public:
  ContextAttention(ProcessGroup& group, ComputeDevice& device) : group_(group), dev_(device) {}
  // The traffic and waits since the last call.
  CpStats take_stats() { return std::exchange(stats_, CpStats{}); }
  void sum_over_sequences(float* v, int64_t n) override { group_.allreduce(v, size_t(n)); }

 protected:
  // v, grown to at least `floats` (host memory: the CPU's kernels read it; kept between calls).
  static float* grown(std::vector<float>& v, int64_t floats) {
    if (int64_t(v.size()) < floats) v.resize(size_t(floats));
    return v.data();
  }
  static size_t bytes_of(std::initializer_list<const std::vector<float>*> buffers) {
    size_t n = 0;
    for (const std::vector<float>* v : buffers) n += v->capacity();
    return n * sizeof(float);
  }
  // The positions group rank `rank` holds of the sequences `mine` is a share of.
  SequenceShard shard_of(const SequenceShard& mine, int rank) const {
    return sequence_shard(mine.T, group_.size(), rank);
  }

  ProcessGroup& group_;
  ComputeDevice& dev_;
  CpStats stats_;
};

}  // namespace dtrain
