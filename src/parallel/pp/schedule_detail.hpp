// Internals of the pipeline-schedule files (not for the engine): the greedy list scheduler behind
// every generator, and the dependency rules that the generators, validate() and simulate() share.
#pragma once
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "parallel/pp/schedule.hpp"

namespace dtrain::pp_detail {

bool is_compute(Op op);
bool is_backward_input(Op op);  // B or I: the pass that produces the input gradient

// The three kinds of compute a rank chooses between: forward, backward (B, or I when split), W.
enum class Kind : int { F = 0, BI = 1, W = 2 };

// How the greedy scheduler chooses. Whenever a rank is idle it runs, among its actions whose inputs
// have arrived, a forward if it may, else a B (or I), else a W, and within a kind the lowest
// `order`. A forward may start only while the rank has fewer than cap[rank] (stage, micro-batch)
// pairs in flight (forwarded, not yet B or W: the memory bound) and fewer than input_cap[rank] not
// yet B or I (the warm-up depth of 1F1B). When a forward waits for memory alone, a W (which frees
// memory) goes before an I.
struct GreedyPolicy {
  bool split_backward = false;  // I and W instead of B
  bool forward_first = false;   // no backward on a rank until all its forwards ran (GPipe)
  bool strict_order = false;    // within a kind, only the rank's lowest-order pending action may run
  std::vector<int> cap;         // [pp]
  std::vector<int> input_cap;   // [pp], empty: no bound
  std::function<int(int rank, Kind kind, int stage, int micro)> order;  // empty: the micro-batch
  ActionCosts costs;  // the durations the lists are built for (F 1, B 2, I 1, W 1)
};

// Runs the policy on an ideal machine and returns each rank's compute actions in the order they
// started, with the sends and receives inserted. Throws Error when the ranks stop with work left.
Schedule greedy_schedule(const std::string& name, int pp, int virtual_stages, int microbatches,
                         std::vector<int> stage_rank, const GreedyPolicy& policy);

// Adds SEND_F / SEND_B right after the compute that produces a tensor for a stage on another rank,
// and RECV_F / RECV_B right before the compute that consumes one.
void insert_communication(Schedule& s);

// The lists run as the engine runs them: a send never blocks and its message arrives costs.comm
// later; a receive waits for its message; compute takes its cost. Goes on until no rank can: a rank
// whose pos is short of its list's end waits forever there (deadlock). simulate() and validate()
// both replay this way.
struct Replay {
  std::vector<std::vector<TimedAction>> ranks;  // compute actions, in time order
  std::vector<size_t> pos;                      // [pp]: where each rank stopped
  std::vector<double> clock, busy;              // [pp]: its time then, and how much of it computing
};
Replay replay(const Schedule& s, const ActionCosts& costs);

}  // namespace dtrain::pp_detail
