// The planner's time model (see step_time.hpp).
#include "train/plan/step_time.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "parallel/pp/schedule.hpp"

namespace dtrain {

namespace {

// Elements moved per element of hidden state by an element-wise pass, forward and backward: each
// kernel reads its input and writes its output, the backward reads both and writes the gradient.
constexpr double kStreamsPerActivationByte = 3.0;
// Selective recompute runs the attention's softmax and the activations' forward again: Korthikanti
// et al. 2022 (Table 4) measure 2.7% more time for GPT-3 with it; full recompute runs every hidden
// unit's forward again (a third of its training FLOPs).
constexpr double kSelectiveExtra = 0.027;

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

double collective_seconds(Collective c, double bytes, int n, const Link& link, const std::string& algorithm) {
  if (n <= 1 || bytes <= 0) return 0.0;
  double share = 1.0, steps = 1.0;
  const double ring_steps = n - 1.0, tree_steps = std::ceil(std::log2(double(n)));
  switch (c) {
    case Collective::all_reduce:
      share = 2.0 * (n - 1) / n;
      steps = 2.0 * (algorithm == "tree" ? tree_steps : ring_steps);
      break;
    case Collective::all_gather:
    case Collective::reduce_scatter:
      share = double(n - 1) / n;
      steps = algorithm == "tree" ? tree_steps : ring_steps;
      break;
    case Collective::all_to_all:
      share = double(n - 1) / n;
      steps = ring_steps;  // one message to every other rank
      break;
    case Collective::p2p: break;
  }
  return steps * link.latency_us * 1e-6 + bytes * share / (link.bus_gbs * 1e9);
}

const Link& link_of(const std::vector<int>& ranks, const Hardware& h) {
  const auto [lo, hi] = std::minmax_element(ranks.begin(), ranks.end());
  return *lo / h.ranks_per_node == *hi / h.ranks_per_node ? h.intra : h.inter;
}

namespace {

// What one rank's passes cost: forward and backward seconds of each of its stages for one micro-batch.
struct PassCosts {
  std::vector<StageCosts> stages;
  double compute = 0.0;  // all passes of the step
};

PassCosts pass_costs(const RankWork& w, const Layout& l, double flops_rate, const Hardware& h) {
  PassCosts c;
  const double cp = l.shape.cp;
  // activations streamed per pass, spread over the stages by their FLOPs
  double flops = 0.0;
  for (const RankWork::Stage& s : w.stages) flops += s.flops_per_sample;
  const double stream = kStreamsPerActivationByte * double(w.activation_bytes) / (h.memory_gbs * 1e9);
  for (const RankWork::Stage& s : w.stages) {
    const double f = s.flops_per_sample * double(w.micro_batch) / cp;  // a sample's share of the positions
    const double share = flops > 0 ? s.flops_per_sample / flops : 1.0 / double(w.stages.size());
    double fwd = f / 3.0 / flops_rate + share * stream / 3.0, bwd = 2.0 * f / 3.0 / flops_rate + share * stream * 2.0 / 3.0;
    if (l.recompute == Recompute::full) bwd += fwd;
    if (l.recompute == Recompute::selective) bwd += kSelectiveExtra * (fwd + bwd);
    StageCosts sc;
    sc.F = fwd;
    sc.B = bwd;
    sc.I = bwd / 2;
    sc.W = bwd / 2;
    c.stages.push_back(sc);
    c.compute += (fwd + bwd) * double(w.passes);  // every micro-batch passes each of its stages
  }
  return c;
}

}  // namespace

StepTime step_time(const PlanJob& job, const Layout& l, const std::vector<RankBuild>& ranks, const Hardware& h) {
  const MeshShape& m = l.shape;
  const double rate = h.matmul_tflops(job.precision) * 1e12;
  const std::string& alg = h.algorithm;
  StepTime best;  // the slowest rank's
  std::vector<PassCosts> costs;
  for (const RankBuild& b : ranks) costs.push_back(pass_costs(b.work, l, rate, h));
  // the pipeline: its schedule simulated on every stage's costs, transfers included
  double pipeline_span = 0.0;  // the schedule's makespan, its transfers included
  if (m.pp > 1) {
    const RankWork& w0 = ranks.front().work;
    const Schedule s = make_schedule(l.schedule, m.pp, l.virtual_stages, l.microbatches > 0 ? l.microbatches : m.pp);
    ActionCosts ac;
    ac.stages.resize(size_t(s.stages()));
    for (int r = 0; r < m.pp; ++r) {
      const std::vector<int> st = s.stages_of(r);
      for (size_t k = 0; k < st.size() && k < costs[size_t(r)].stages.size(); ++k)
        ac.stages[size_t(st[k])] = costs[size_t(r)].stages[k];
    }
    const double bytes = double(w0.hidden_floats) * sizeof(float);
    std::vector<int> pair = mesh_group(m, ranks.front().rank, {MeshDim::pp});
    ac.comm = collective_seconds(Collective::p2p, bytes, 2, link_of(pair, h), alg);
    const Simulation sim = simulate(s, ac);
    const double accum = double(w0.passes) / double(s.microbatches);
    pipeline_span = sim.makespan * accum;
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankBuild& b = ranks[i];
    const RankWork& w = b.work;
    StepTime t;
    t.compute = costs[i].compute;
    if (m.pp > 1) t.bubble = std::max(0.0, pipeline_span - t.compute);
    const double backward = t.compute * 2.0 / 3.0 / double(std::max<int64_t>(w.passes, 1));  // the last pass's
    // data parallel
    const int shard = m.dp_shard * m.cp, replicas = m.dp_replicate;
    if (m.dp_shard > 1) {
      const std::vector<int> group = mesh_group(m, b.rank, {MeshDim::dp_shard, MeshDim::cp});
      const Link& link = link_of(group, h);
      const double gather_bytes = job.precision == Precision::bf16 ? 2.0 : 4.0;
      const double reduce_bytes = job.cfg.parallel.fsdp_reduce_dtype == "bf16" ? 2.0 : 4.0;
      const double gathers_per_pass = job.cfg.parallel.fsdp_reshard_after_forward ? 2.0 : 1.0;
      const double passes = m.pp > 1 ? 1.0 : double(w.passes);  // a pipeline gathers once per step
      const double unit_compute = t.compute / double(std::max<size_t>(w.unit_floats.size(), 1)) / double(w.passes);
      double exposed = 0.0;
      for (int64_t f : w.unit_floats) {
        const double ag = collective_seconds(Collective::all_gather, double(f) * gather_bytes, shard, link, alg);
        const double rs = collective_seconds(Collective::reduce_scatter, double(f) * reduce_bytes, shard, link, alg);
        // prefetched behind the unit before it: what it does not hide shows
        exposed += passes * gathers_per_pass * std::max(0.0, ag - unit_compute) + std::max(0.0, rs - unit_compute);
      }
      exposed += collective_seconds(Collective::all_gather, double(w.unit_floats.front()) * gather_bytes, shard, link,
                                    alg);  // the first gather waits
      if (replicas > 1) {
        const std::vector<int> reps = mesh_group(m, b.rank, {MeshDim::dp_replicate});
        exposed += collective_seconds(Collective::all_reduce, double(w.held_floats) / shard * 4.0, replicas,
                                      link_of(reps, h), alg);
      }
      t.data_parallel = exposed;
    } else if (m.dp() * m.cp > 1) {
      const std::vector<int> group = mesh_group(m, b.rank, {MeshDim::dp_replicate, MeshDim::dp_shard, MeshDim::cp});
      const double all = collective_seconds(Collective::all_reduce, double(w.held_floats) * 4.0, int(group.size()),
                                            link_of(group, h), alg);
      const double buckets = double(std::max<int64_t>(w.ddp_buckets, 1));
      // buckets go out as the backward completes them: the last one, and what the backward cannot hide
      t.data_parallel = std::max(all / buckets, all - backward * (buckets - 1) / buckets);
    }
    // tensor parallel: two collectives forward and two backward per hidden unit and pass (all-reduce,
    // or all-gather and reduce-scatter under sequence parallel), on the hidden state
    if (m.tp > 1) {
      const std::vector<int> group = mesh_group(m, b.rank, {MeshDim::tp});
      const Link& link = link_of(group, h);
      const double rows_bytes = double(w.hidden_floats) * 4.0 * (l.tp_sequence ? m.tp : 1);
      const double one = l.tp_sequence ? collective_seconds(Collective::all_gather, rows_bytes, m.tp, link, alg) +
                                             collective_seconds(Collective::reduce_scatter, rows_bytes, m.tp, link, alg)
                                       : collective_seconds(Collective::all_reduce, rows_bytes, m.tp, link, alg);
      double units = 0;
      for (const RankWork::Stage& s : w.stages) units += s.units;
      t.tensor_parallel = 2.0 * one * units * double(w.passes) * (l.recompute == Recompute::full ? 1.5 : 1.0);
    }
    // context parallel (ring): every hidden unit passes its keys and values around the ring forward
    // and their gradients back; hidden behind the attention of the block before, shown when longer
    if (m.cp > 1) {
      const std::vector<int> group = mesh_group(m, b.rank, {MeshDim::cp});
      const double kv = 2.0 * double(w.hidden_floats) * 4.0;  // keys and values: at most two hidden states
      double units = 0;
      for (const RankWork::Stage& s : w.stages) units += s.units;
      const double per_unit =
          3.0 * (m.cp - 1) * collective_seconds(Collective::p2p, kv, 2, link_of(group, h), alg);
      const double unit_compute = t.compute / std::max(units, 1.0) / double(w.passes);
      t.context_parallel = units * double(w.passes) * std::max(0.0, per_unit - 0.5 * unit_compute);
    }
    // expert parallel: each mixture-of-experts unit sends its tokens' rows to their experts and back,
    // forward and backward
    if (m.ep > 1) {
      const std::vector<int> group = expert_group(m, b.rank, ExpertGroup::ep);
      const double top_k = job.cfg.model.values.contains("top_k") ? job.cfg.model.values["top_k"].get<double>() : 1.0;
      const double bytes = double(w.hidden_floats) * 4.0 * top_k;
      double moe_units = 0;
      for (const RankWork::Stage& s : w.stages) moe_units += s.units;
      t.expert_parallel =
          4.0 * moe_units * double(w.passes) * collective_seconds(Collective::all_to_all, bytes, m.ep, link_of(group, h), alg);
    }
    // the optimizer: reads parameters, gradients and state, writes parameters and state
    const double params = m.dp_shard > 1 ? double(w.held_floats) / shard : double(w.held_floats);
    t.optimizer = (params * 12.0 + double(w.state_floats) * 8.0) / (h.memory_gbs * 1e9);
    if (t.total() > best.total()) best = t;
  }
  return best;
}

}  // namespace dtrain
