// ContextParallel (see context_parallel.hpp).
#include "parallel/cp/context_parallel.hpp"

#include "core/error.hpp"
#include "parallel/cp/all_to_all_attention.hpp"
#include "parallel/cp/ring_attention.hpp"

namespace dtrain {

CpMode cp_mode(const std::string& name) {
  if (name == "ring") return CpMode::ring;
  if (name == "alltoall") return CpMode::alltoall;
  throw ConfigError("parallel.cp_mode = \"" + name + "\": choose ring or alltoall");
}

const char* cp_mode_name(CpMode m) { return m == CpMode::ring ? "ring" : "alltoall"; }

ContextParallel::ContextParallel(ProcessGroup& group, CpMode mode, ComputeDevice& device) : group_(group), mode_(mode) {
  if (device.kind() != DeviceKind::cpu)
    throw ConfigError("context parallel (parallel.cp > 1) runs on the CPU in this version, not on " + device.describe() +
                      ": set train.device = cpu, or parallel.cp = 1");
  if (mode == CpMode::ring) {
    auto ring = std::make_unique<RingAttention>(group, device);
    stats_ = &ring->stats();
    attention_ = std::move(ring);
  } else {
    auto a2a = std::make_unique<AllToAllAttention>(group, device);
    stats_ = &a2a->stats();
    attention_ = std::move(a2a);
  }
}

ContextParallel::~ContextParallel() = default;

StepContext ContextParallel::local(const StepContext& whole) const {
  StepContext ctx = whole;
  ctx.sequence = sequence_shard(whole.T, group_.size(), group_.rank());
  ctx.T = 2 * ctx.sequence.chunk;
  return ctx;
}

CpStats ContextParallel::take_stats() {
  const CpStats s = *stats_;
  *stats_ = {};
  return s;
}

}  // namespace dtrain
