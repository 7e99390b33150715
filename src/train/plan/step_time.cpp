// The planner's time model (see step_time.hpp).
#include "train/plan/step_time.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "parallel/pp/schedule.hpp"

namespace dtrain {

namespace {

struct Part {
  const char* name;
  double seconds;
};

}  // namespace

std::string StepTime::describe() const {
  const Part parts[] = {{"compute", compute},         {"bubble", bubble},      {"dp", data_parallel},
                        {"tp", tensor_parallel},      {"cp", context_parallel},
                        {"ep", expert_parallel},      {"optimizer", optimizer}};
  char b[64];
  std::snprintf(b, sizeof b, "%.1f ms:", total() * 1e3);
  std::string s = b;
  bool first = true;
  for (const Part& p : parts) {
    if (p.seconds <= 0) continue;
    std::snprintf(b, sizeof b, "%s %.1f %s", first ? "" : " +", p.seconds * 1e3, p.name);
    s += b;
    first = false;
  }
  return s;
}

std::string StepTime::largest_overhead() const {
  const Part parts[] = {{"the pipeline's bubble", bubble},
                        {"data-parallel communication", data_parallel},
                        {"tensor-parallel communication", tensor_parallel},
                        {"context-parallel communication", context_parallel},
                        {"expert all-to-all", expert_parallel},
                        {"the optimizer step", optimizer}};
  const Part* top = std::max_element(std::begin(parts), std::end(parts),
                                     [](const Part& a, const Part& b) { return a.seconds < b.seconds; });
  return top->name;
}

CollectiveShape collective_shape(Collective c, int n, const std::string& algorithm) {
  const double ring_steps = n - 1.0, tree_steps = std::ceil(std::log2(double(n)));
  switch (c) {
    case Collective::all_reduce: return {2.0 * (n - 1) / n, 2.0 * (algorithm == "tree" ? tree_steps : ring_steps)};
    case Collective::all_gather:
    case Collective::reduce_scatter: return {double(n - 1) / n, algorithm == "tree" ? tree_steps : ring_steps};
    case Collective::all_to_all: return {double(n - 1) / n, ring_steps};  // one message to every other rank
    case Collective::p2p: break;
  }
  return {1.0, 1.0};
}

double collective_seconds(Collective c, double bytes, int n, const Link& link, const std::string& algorithm) {
  if (n <= 1 || bytes <= 0) return 0.0;
  const CollectiveShape k = collective_shape(c, n, algorithm);
  return k.steps * link.latency_us * 1e-6 + bytes * k.share / (link.bus_gbs * 1e9);
}

const Link& link_of(const std::vector<int>& ranks, const Hardware& h) {
  const auto [lo, hi] = std::minmax_element(ranks.begin(), ranks.end());
  return *lo / h.ranks_per_node == *hi / h.ranks_per_node ? h.intra : h.inter;
}

namespace {

// Forward and backward seconds of each of a rank's stages for one micro-batch, from its step's
// compute time: shared by the stages as their FLOPs, a backward twice a forward (three times with
// full recompute, which runs the forward again).
std::vector<StageCosts> stage_costs(const RankWork& w, Recompute recompute) {
  double flops = 0.0;
  for (double f : w.stage_flops) flops += f;
  const double per_pass = w.step.compute / double(std::max<int64_t>(w.passes, 1));
  const double fwd_share = recompute == Recompute::full ? 0.25 : 1.0 / 3.0;
  std::vector<StageCosts> out;
  for (double f : w.stage_flops) {
    const double c = per_pass * (flops > 0 ? f / flops : 1.0 / double(w.stage_flops.size()));
    StageCosts sc;
    sc.F = c * fwd_share;
    sc.B = c - sc.F;
    sc.I = sc.B / 2;
    sc.W = sc.B / 2;
    out.push_back(sc);
  }
  return out;
}

}  // namespace

std::vector<double> stage_speeds(const Schedule& s, const Simulation& sim, const Hardware& h) {
  std::vector<double> speed(size_t(s.stages()), 1.0);
  const int R = h.ranks_per_node;
  if (h.shared_speed(1.0) == 1.0 || R % s.pp != 0) return speed;
  const double replicas = double(R / s.pp);  // the node's copies of each pipeline rank, in step
  // the timeline cut at every start and end: between two cuts the ranks computing do not change
  std::vector<double> cuts;
  for (const auto& list : sim.ranks)
    for (const TimedAction& t : list) cuts.insert(cuts.end(), {t.start, t.end});
  std::sort(cuts.begin(), cuts.end());
  std::vector<int> busy(cuts.size(), 0);  // pipeline ranks computing from cuts[i] to cuts[i + 1]
  for (const auto& list : sim.ranks)
    for (const TimedAction& a : list)
      for (size_t i = 0; i + 1 < cuts.size(); ++i) busy[i] += a.start <= cuts[i] && cuts[i + 1] <= a.end;
  std::vector<double> work(speed.size(), 0.0), seconds(speed.size(), 0.0);
  for (const auto& list : sim.ranks)
    for (const TimedAction& a : list)
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        const double lo = std::max(a.start, cuts[i]), hi = std::min(a.end, cuts[i + 1]);
        if (hi <= lo) continue;
        work[size_t(a.action.stage)] += (hi - lo) * h.shared_speed(replicas * busy[i]);
        seconds[size_t(a.action.stage)] += hi - lo;
      }
  for (size_t k = 0; k < speed.size(); ++k)
    if (seconds[k] > 0) speed[k] = work[k] / seconds[k];
  return speed;
}

namespace {

// The pipeline's makespan for one step: the schedule simulated on the stages' costs, at the speed each
// stage computes on a node whose ranks share its cores (found by simulating again at the speeds the
// last timeline gave, a few times); and each pipeline rank's speed (its stages' mean).
struct PipelineSpan {
  double makespan = 0.0;
  std::vector<double> rank_speed;  // by pipeline rank: its computation's speed against the profile's
};

PipelineSpan pipeline_span(const Schedule& s, const ActionCosts& costs, const Hardware& h) {
  Simulation sim = simulate(s, costs);
  std::vector<double> speed(size_t(s.stages()), 1.0);
  for (int round = 0; round < 4; ++round) {
    speed = stage_speeds(s, sim, h);
    if (std::all_of(speed.begin(), speed.end(), [](double v) { return v == 1.0; })) break;
    ActionCosts faster = costs;
    for (size_t k = 0; k < faster.stages.size() && k < speed.size(); ++k) {
      StageCosts& c = faster.stages[k];
      for (double* x : {&c.F, &c.B, &c.I, &c.W}) *x /= speed[k];
    }
    sim = simulate(s, faster);
  }
  PipelineSpan out{sim.makespan, std::vector<double>(size_t(s.pp), 1.0)};
  for (int r = 0; r < s.pp; ++r) {
    const std::vector<int> st = s.stages_of(r);
    double sum = 0.0;
    for (int k : st) sum += speed[size_t(k)] / double(st.size());
    if (!st.empty()) out.rank_speed[size_t(r)] = sum;
  }
  return out;
}

double waited(const StepClockTally& t, const char* kind) {
  auto it = t.waited.find(kind);
  return it == t.waited.end() ? 0.0 : it->second;
}

}  // namespace

StepTime step_time(const Layout& l, const std::vector<RankBuild>& ranks, const Hardware& h) {
  const MeshShape& m = l.shape;
  // the pipeline: its schedule simulated on every stage's costs, the transfers as its communication
  double span = 0.0;
  std::vector<double> speed;  // by pipeline rank (ranks' first m.pp): its computation's speed
  if (m.pp > 1) {
    const RankWork& w0 = ranks.front().work;
    const Schedule s = make_schedule(l.schedule, m.pp, l.virtual_stages, l.microbatches > 0 ? l.microbatches : m.pp);
    ActionCosts ac;
    ac.stages.resize(size_t(s.stages()));
    for (int r = 0; r < m.pp && r < int(ranks.size()); ++r) {
      const std::vector<int> st = s.stages_of(r);
      const std::vector<StageCosts> c = stage_costs(ranks[size_t(r)].work, l.recompute);
      for (size_t k = 0; k < st.size() && k < c.size(); ++k) ac.stages[size_t(st[k])] = c[k];
    }
    const std::vector<int> pair = mesh_group(m, ranks.front().rank, {MeshDim::pp});
    ac.comm = collective_seconds(Collective::p2p, double(w0.hidden_floats) * sizeof(float), 2, link_of(pair, h),
                                 h.algorithm);
    const PipelineSpan p = pipeline_span(s, ac, h);
    span = p.makespan * double(w0.passes) / double(s.microbatches);
    speed = p.rank_speed;
  }
  StepTime slowest;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const StepClockTally& c = ranks[i].work.step;
    StepTime t;
    t.compute = c.compute / (i < speed.size() ? speed[i] : 1.0);  // (faster where the bubble lends it cores)
    t.optimizer = c.optimizer;
    t.data_parallel = waited(c, "dp");
    t.tensor_parallel = waited(c, "tp");
    t.context_parallel = waited(c, "cp");
    t.expert_parallel = waited(c, "ep");
    if (m.pp > 1) t.bubble = std::max(0.0, span - t.compute);  // the transfers' waits are in the schedule
    if (t.total() > slowest.total()) slowest = t;
  }
  return slowest;
}

}  // namespace dtrain
