// The planner's time model: a training step from its ranks' steps run on the counting device
// (RankWork::step: every kernel timed from the profile's rates, every collective from a
// latency/bandwidth model of the link its group spans and the algorithm, overlapping as the code
// overlaps it), and, under pipeline parallel, the schedule simulated on each stage's costs for the
// bubble.
#pragma once
#include <string>
#include <vector>

#include "train/plan/hardware.hpp"
#include "train/plan/rank_build.hpp"

namespace dtrain {

struct StepTime {
  double compute = 0.0;   // the rank's forward and backward passes (recompute included)
  double bubble = 0.0;    // pipeline: idle time of the schedule on those costs, its transfers' waits included
  double data_parallel = 0.0;  // DDP / FSDP / HSDP communication not hidden behind compute
  double tensor_parallel = 0.0;
  double context_parallel = 0.0;
  double expert_parallel = 0.0;
  double optimizer = 0.0;
  double total() const {
    return compute + bubble + data_parallel + tensor_parallel + context_parallel + expert_parallel +
           optimizer;
  }
  // "412 ms: 350 compute + 21 bubble + 30 dp + 11 optimizer"
  std::string describe() const;
  // The largest part after compute, named ("bubble", "data-parallel communication", …).
  std::string largest_overhead() const;
};

// Seconds of one collective moving `bytes` per rank over a group of n ranks on `link`: all-reduce
// 2(n−1)/n of the bytes over the bus, all-gather, reduce-scatter and all-to-all (n−1)/n, point to
// point all of them; latency per the algorithm's steps.
enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, p2p };
// What of the bytes crosses the bus, and the algorithm's latency steps, over n ranks.
struct CollectiveShape {
  double share, steps;
};
CollectiveShape collective_shape(Collective c, int n, const std::string& algorithm);
double collective_seconds(Collective c, double bytes, int n, const Link& link, const std::string& algorithm);

// The link a group of global ranks spans: the node's when all sit in one node, else the network's.
const Link& link_of(const std::vector<int>& ranks, const Hardware& h);

// One optimizer step of `layout`, from the builds of its pipeline ranks (`stages[i]`: a rank of pp
// coordinate i), as the slowest rank sees it.
StepTime step_time(const Layout& layout, const std::vector<RankBuild>& stages, const Hardware& h);

struct Schedule;  // (parallel/pp/schedule.hpp)
struct Simulation;

// On a node whose ranks share its cores (Hardware::rank_slots below ranks_per_node, the node holding
// whole pipelines), each pipeline stage's mean speed over its actions on `sim`'s timeline against the
// profile's rates (those of every rank computing): faster where other stages wait. 1 elsewhere.
std::vector<double> stage_speeds(const Schedule& s, const Simulation& sim, const Hardware& h);

}  // namespace dtrain
