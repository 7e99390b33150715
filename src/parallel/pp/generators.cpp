// The schedule generators: one greedy list scheduler over an ideal-time run, and the five policies
// (GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-V) that make it produce the textbook schedules.
#include <algorithm>
#include <climits>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "parallel/pp/schedule_detail.hpp"

namespace dtrain {
namespace pp_detail {

namespace {

constexpr double kEps = 1e-9;

struct Pending {
  int stage = 0, micro = 0, order = 0;
  bool done = false;
};

std::string shape_text(int pp, int v, int m) {
  return "pp " + std::to_string(pp) + ", virtual " + std::to_string(v) + ", micro-batches " + std::to_string(m);
}

}  // namespace

bool is_compute(Op op) { return op == Op::F || op == Op::B || op == Op::I || op == Op::W; }
bool is_backward_input(Op op) { return op == Op::B || op == Op::I; }

Schedule greedy_schedule(const std::string& name, int pp, int v, int m, std::vector<int> stage_rank,
                         const GreedyPolicy& policy) {
  const int S = pp * v;
  Schedule s;
  s.name = name;
  s.pp = pp;
  s.virtual_stages = v;
  s.microbatches = m;
  s.stage_rank = std::move(stage_rank);
  s.ranks.assign(pp, {});
  const ActionCosts& c = policy.costs;
  const bool split = policy.split_backward;

  // End times of each (stage, micro-batch)'s F and B-or-I once placed; -1 before.
  std::vector<double> f_end(size_t(S) * m, -1.0), bi_end(f_end);
  auto at = [m](int stage, int micro) { return size_t(stage) * m + micro; };

  // Per rank and kind, the actions still to place, in policy order.
  std::vector<std::array<std::vector<Pending>, 3>> pending(pp);
  std::vector<std::array<size_t, 3>> first_open(pp, {0, 0, 0});
  std::vector<int> forwards_left(pp, 0), in_flight(pp, 0), before_input(pp, 0);
  for (int st = 0; st < S; ++st) {
    const int r = s.stage_rank[st];
    forwards_left[r] += m;
    for (int k = 0; k < m; ++k)
      for (Kind kind : {Kind::F, Kind::BI, Kind::W}) {
        if (kind == Kind::W && !split) continue;
        pending[r][int(kind)].push_back({st, k, policy.order ? policy.order(r, kind, st, k) : k, false});
      }
  }
  size_t left = 0;
  for (auto& kinds : pending)
    for (auto& list : kinds) {
      std::stable_sort(list.begin(), list.end(), [](const Pending& a, const Pending& b) {
        return a.order != b.order ? a.order < b.order : a.micro != b.micro ? a.micro < b.micro : a.stage < b.stage;
      });
      left += list.size();
    }

  // When an action's inputs are on the rank (-1: not yet produced).
  auto ready_time = [&](int r, Kind kind, int st, int k) -> double {
    auto arrive = [&](double end, int from_stage) {
      if (end < 0) return -1.0;
      return s.stage_rank[from_stage] == r ? end : end + c.comm;
    };
    switch (kind) {
      case Kind::F:
        return st == 0 ? 0.0 : arrive(f_end[at(st - 1, k)], st - 1);
      case Kind::BI: {
        const double f = f_end[at(st, k)];
        if (f < 0 || st == S - 1) return f;
        const double g = arrive(bi_end[at(st + 1, k)], st + 1);
        return g < 0 ? -1.0 : std::max(f, g);
      }
      case Kind::W:
        return bi_end[at(st, k)];
    }
    return -1.0;
  };

  std::vector<double> free_at(pp, 0.0);
  std::set<double> events = {0.0};
  double t = 0.0;
  while (left > 0) {
    bool placed = true;
    while (placed) {  // zero-cost actions may free a rank again at the same moment
      placed = false;
      for (int r = 0; r < pp; ++r) {
        if (free_at[r] > t + kEps) continue;
        // Forward first (within the memory bounds), then B or I, then W; but a W that frees memory for a
        // forward that waits for nothing else goes before I.
        Pending* best = nullptr;
        Kind best_kind = Kind::F;
        bool memory_bound = false;
        for (Kind kind : {Kind::F, Kind::BI, Kind::W}) {
          if (kind == Kind::BI && policy.forward_first && forwards_left[r] > 0) continue;
          if (best && !(kind == Kind::W && memory_bound)) break;
          auto& list = pending[r][int(kind)];
          for (size_t i = first_open[r][int(kind)]; i < list.size(); ++i) {
            Pending& p = list[i];
            if (p.done) continue;
            double ready = ready_time(r, kind, p.stage, p.micro);
            if (kind == Kind::F && ready >= 0) {
              const bool input_ok = policy.input_cap.empty() || before_input[r] < policy.input_cap[r];
              if (!input_ok || in_flight[r] >= policy.cap[r]) {
                memory_bound = memory_bound || (input_ok && ready <= t + kEps);
                ready = -1.0;
              }
            }
            if (ready >= 0 && ready <= t + kEps) {
              best = &p;
              best_kind = kind;
              break;
            }
            if (policy.strict_order) break;
          }
        }
        if (!best) continue;
        const Op op = best_kind == Kind::F ? Op::F : best_kind == Kind::W ? Op::W : split ? Op::I : Op::B;
        const double dur = op == Op::F ? c.F : op == Op::B ? c.B : op == Op::I ? c.I : c.W;
        const double end = t + dur;
        const size_t i = at(best->stage, best->micro);
        if (best_kind != Kind::W) (best_kind == Kind::F ? f_end : bi_end)[i] = end;
        if (best_kind == Kind::F) {
          ++in_flight[r];
          ++before_input[r];
          --forwards_left[r];
        } else {
          if (best_kind == Kind::BI) --before_input[r];
          if (best_kind == Kind::W || !split) --in_flight[r];
        }
        best->done = true;
        auto& list = pending[r][int(best_kind)];
        while (first_open[r][int(best_kind)] < list.size() && list[first_open[r][int(best_kind)]].done)
          ++first_open[r][int(best_kind)];
        s.ranks[r].push_back({op, best->stage, best->micro});
        free_at[r] = end;
        events.insert(end);
        if (c.comm > 0) events.insert(end + c.comm);
        --left;
        placed = true;
      }
    }
    if (left == 0) break;
    auto next = events.upper_bound(t + kEps);
    if (next == events.end())
      throw Error("the " + name + " schedule cannot be built for " + shape_text(pp, v, m) +
                  ": its ranks stop with work left; use more micro-batches or another parallel.pp_schedule");
    t = *next;
    events.erase(events.begin(), next);
  }
  insert_communication(s);
  return s;
}

void insert_communication(Schedule& s) {
  const int S = s.stages();
  for (int r = 0; r < s.pp; ++r) {
    std::vector<Action> out;
    out.reserve(s.ranks[r].size() * 2);
    for (const Action& a : s.ranks[r]) {
      const bool remote_prev = a.stage > 0 && s.stage_rank[a.stage - 1] != r;
      const bool remote_next = a.stage < S - 1 && s.stage_rank[a.stage + 1] != r;
      if (a.op == Op::F && remote_prev) out.push_back({Op::RECV_F, a.stage, a.micro});
      if (is_backward_input(a.op) && remote_next) out.push_back({Op::RECV_B, a.stage, a.micro});
      out.push_back(a);
      if (a.op == Op::F && remote_next) out.push_back({Op::SEND_F, a.stage, a.micro});
      if (is_backward_input(a.op) && remote_prev) out.push_back({Op::SEND_B, a.stage, a.micro});
    }
    s.ranks[r] = std::move(out);
  }
}

}  // namespace pp_detail

namespace {

using pp_detail::GreedyPolicy;
using pp_detail::Kind;

// Megatron's interleaved order: micro-batches in groups of pp; each group runs through the rank's
// stages in turn (forward: first stage first; backward: last first), a group at a time.
int interleaved_order(int pp, int v, int m, Kind kind, int chunk, int micro) {
  const int group = micro / pp, first = group * pp, size = std::min(pp, m - first);
  const int c = kind == Kind::F ? chunk : v - 1 - chunk;
  return first * v + c * size + (micro - first);
}

std::vector<int> loop_placement(int pp, int v) {
  std::vector<int> r(size_t(pp) * v);
  for (int s = 0; s < pp * v; ++s) r[s] = s % pp;
  return r;
}

std::vector<int> v_placement(int pp) {
  std::vector<int> r(size_t(2) * pp);
  for (int s = 0; s < 2 * pp; ++s) r[s] = s < pp ? s : 2 * pp - 1 - s;
  return r;
}

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v"};
  return names;
}

Schedule make_schedule(const std::string& name, int pp, int v, int m) {
  const auto& names = schedule_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw Error("unknown pipeline schedule `" + name + "`: use one of " + list);
  }
  check_schedule_shape(pp, v, m, "schedule " + name);
  GreedyPolicy p;
  p.cap.assign(pp, INT_MAX);
  if (name == "gpipe" || name == "1f1b" || name == "zb-h1") {
    require(v == 1, "parallel.pp_schedule = " + name + " runs one stage per rank but parallel.pp_virtual = " +
                        std::to_string(v) + ": set parallel.pp_virtual = 1, or use interleaved-1f1b or zb-v");
    std::vector<int> placement(pp);
    for (int r = 0; r < pp; ++r) placement[r] = r;
    if (name == "gpipe") {
      p.forward_first = true;
    } else if (name == "1f1b") {
      for (int r = 0; r < pp; ++r) p.cap[r] = pp - r;  // warm-up of pp-r-1 forwards, then one forward per backward
    } else {
      // 1F1B's warm-up with B split: W waits (filling the gaps) while the rank keeps at most 1F1B's
      // peak (rank 0's pp) in flight; rank 0 has no room to wait, later ranks wait longer.
      p.split_backward = true;
      p.input_cap.resize(pp);
      for (int r = 0; r < pp; ++r) {
        p.cap[r] = pp;
        p.input_cap[r] = pp - r;
      }
    }
    p.strict_order = true;
    return pp_detail::greedy_schedule(name, pp, 1, m, placement, p);
  }
  if (name == "interleaved-1f1b") {
    require(v >= 2, "parallel.pp_schedule = interleaved-1f1b needs parallel.pp_virtual >= 2 (got " + std::to_string(v) +
                        "): set it to 2 or more, or use 1f1b");
    require(m % pp == 0, "parallel.pp_schedule = interleaved-1f1b needs parallel.microbatches (" + std::to_string(m) +
                             ") to be a multiple of parallel.pp (" + std::to_string(pp) + "): use " +
                             std::to_string((m + pp - 1) / pp * pp) + " micro-batches");
    p.strict_order = true;
    p.order = [pp, v, m](int, Kind kind, int stage, int micro) {
      return interleaved_order(pp, v, m, kind, stage / pp, micro);
    };
    for (int r = 0; r < pp; ++r) p.cap[r] = (pp - r - 1) * 2 + (v - 1) * pp + 1;  // Megatron's warm-up + 1
    return pp_detail::greedy_schedule(name, pp, v, m, loop_placement(pp, v), p);
  }
  // zb-v
  require(v == 2, "parallel.pp_schedule = zb-v needs parallel.pp_virtual = 2 (got " + std::to_string(v) +
                      "): set parallel.pp_virtual = 2");
  // ZB-H1's rules on a V: 1F1B's memory (2pp half-stages in flight), and the way back up the V (the
  // rank's second stage) before the way down, so that micro-batches leave as early as they can.
  p.split_backward = true;
  for (int r = 0; r < pp; ++r) p.cap[r] = 2 * pp;
  p.order = [pp](int, Kind, int stage, int micro) { return 2 * micro + (stage >= pp ? 0 : 1); };
  return pp_detail::greedy_schedule(name, pp, 2, m, v_placement(pp), p);
}

}  // namespace dtrain
