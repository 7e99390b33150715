// The planner's clock for one rank's training step run on the counting device over a stand-in mesh:
// every kernel call advances the compute stream by its modelled time (FLOPs over the profile's rates,
// bytes over its memory bandwidth, a launch cost); every collective starts when issued and its group
// is free, lasts what its link and algorithm say (on a CPU node, longer while the rank computes beside
// it), and holds the compute stream up only where the code waits for it — so communication overlaps
// exactly as each strategy's code overlaps it.
#pragma once
#include <map>
#include <mutex>
#include <string>

#include "comm/mesh.hpp"
#include "kernels/counting_device.hpp"
#include "train/plan/hardware.hpp"

namespace dtrain {

// What a step's clock saw.
struct StepClockTally {
  double end = 0.0;        // the compute stream's time at the end
  double compute = 0.0;    // kernel time of the passes (forward, backward, recompute)
  double optimizer = 0.0;  // kernel time of the update
  // time the compute stream lost to each kind of group ("dp", "tp", "pp", "cp", "ep"): waiting for
  // its operations, and (OpSeconds::steal, Hardware::allreduce_steal_seconds) running slower beside them
  std::map<std::string, double> waited;
  std::map<std::string, double> kernels;  // kernel time by kernel name (".bf16" for bf16 products)
};

class StepClock final : public StandInClock {
 public:
  explicit StepClock(const Hardware& h) : h_(h) {}
  double now() override;
  OpSeconds seconds(const std::string& op, double bytes, const std::vector<int>& ranks, const std::string& group) override;
  void wait_until(double start, const OpSeconds& s, const std::string& group) override;
  void kernel(const KernelWork& w);  // CountingDevice::on_kernel
  StepClockTally tally();

 private:
  const double* measured_rate(const std::string& kernel) const;
  double expected_max_normal(int n);  // expected_max_of_normals, memoized (under mu_)
  const Hardware& h_;
  std::mutex mu_;
  StepClockTally t_;
  double met_at_ = 0.0;  // when the compute stream last waited for an operation (its ranks met there)
  std::map<int, double> max_normal_;  // expected_max_normal by group size
};

// The mean of the largest of n draws of a standard normal (0.56 for 2, 1.03 for 4): how far behind
// the mean the slowest of n ranks comes, in standard deviations.
double expected_max_of_normals(int n);

// The kind of a mesh group's name ("dp_shard_cp" → "dp", "expert_shard" → "dp", "ep" → "ep", …).
std::string group_kind(const std::string& group);

}  // namespace dtrain
