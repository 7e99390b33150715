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
  if (mode == CpMode::ring)
    attention_ = std::make_unique<RingAttention>(group, device);
  else
    attention_ = std::make_unique<AllToAllAttention>(group, device);
}

ContextParallel::~ContextParallel() = default;

StepContext ContextParallel::local(const StepContext& whole) const {
  StepContext ctx = whole;
  ctx.sequence = sequence_shard(whole.T, group_.size(), group_.rank());
  ctx.T = 2 * ctx.sequence.chunk;
  return ctx;
}

}  // namespace dtrain
