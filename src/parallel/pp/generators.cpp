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

// The action a rank runs next, and its kind; none when nothing it may run is ready.
struct Choice {
  Pending* pending = nullptr;
  Kind kind = Kind::F;
};

std::string shape_text(int pp, int v, int m) {
  return "pp " + std::to_string(pp) + ", virtual " + std::to_string(v) + ", micro-batches " + std::to_string(m);
}

// One run of the greedy list scheduler on an ideal machine: the compute lists it builds and what
// each rank has still to place.
class GreedyRun {
 public:
  GreedyRun(const std::string& name, int pp, int v, int m, std::vector<int> stage_rank, const GreedyPolicy& policy)
      : policy_(policy),
        c_(policy.costs),
        split_(policy.split_backward),
        S_(pp * v),
        m_(m),
        f_end_(size_t(S_) * m, -1.0),
        bi_end_(f_end_),
        pending_(pp),
        first_open_(pp, {0, 0, 0}),
        forwards_left_(pp, 0),
        in_flight_(pp, 0),
        before_input_(pp, 0),
        free_at_(pp, 0.0) {
    s_.name = name;
    s_.pp = pp;
    s_.virtual_stages = v;
    s_.microbatches = m;
    s_.stage_rank = std::move(stage_rank);
    s_.ranks.assign(pp, {});
    queue_actions();
  }

  // The compute lists in the order the actions started (no sends or receives yet).
  Schedule run() && {
    std::set<double> events = {0.0};
    double t = 0.0;
    while (left_ > 0) {
      bool placed = true;
      while (placed) placed = place_ready(t, events);  // zero-cost actions may free a rank again at once
      if (left_ == 0) break;
      auto next = events.upper_bound(t + kEps);
      if (next == events.end())
        throw Error("the " + s_.name + " schedule cannot be built for " +
                    shape_text(s_.pp, s_.virtual_stages, s_.microbatches) +
                    ": its ranks stop with work left; use more micro-batches or another parallel.pp_schedule");
      t = *next;
      events.erase(events.begin(), next);
    }
    return std::move(s_);
  }

 private:
  size_t at(int stage, int micro) const { return size_t(stage) * m_ + micro; }

  // Per rank and kind, every action to place, in policy order.
  void queue_actions() {
    for (int st = 0; st < S_; ++st) {
      const int r = s_.stage_rank[st];
      forwards_left_[r] += m_;
      for (int k = 0; k < m_; ++k)
        for (Kind kind : {Kind::F, Kind::BI, Kind::W}) {
          if (kind == Kind::W && !split_) continue;
          pending_[r][int(kind)].push_back({st, k, policy_.order ? policy_.order(r, kind, st, k) : k, false});
        }
    }
    for (auto& kinds : pending_)
      for (auto& list : kinds) {
        std::stable_sort(list.begin(), list.end(), [](const Pending& a, const Pending& b) {
          return a.order != b.order ? a.order < b.order : a.micro != b.micro ? a.micro < b.micro : a.stage < b.stage;
        });
        left_ += list.size();
      }
  }

  // When an action's inputs are on the rank (-1: not yet produced).
  double ready_time(int r, Kind kind, int st, int k) const {
    auto arrive = [&](double end, int from_stage) {
      if (end < 0) return -1.0;
      return s_.stage_rank[from_stage] == r ? end : end + c_.comm;
    };
    switch (kind) {
      case Kind::F:
        return st == 0 ? 0.0 : arrive(f_end_[at(st - 1, k)], st - 1);
      case Kind::BI: {
        const double f = f_end_[at(st, k)];
        if (f < 0 || st == S_ - 1) return f;
        const double g = arrive(bi_end_[at(st + 1, k)], st + 1);
        return g < 0 ? -1.0 : std::max(f, g);
      }
      case Kind::W:
        return bi_end_[at(st, k)];
    }
    return -1.0;
  }

  // Each idle rank starts what it chooses at time t; false when none started anything.
  bool place_ready(double t, std::set<double>& events) {
    bool placed = false;
    for (int r = 0; r < s_.pp; ++r) {
      if (free_at_[r] > t + kEps) continue;
      const Choice choice = choose(r, t);
      if (!choice.pending) continue;
      place(r, choice, t, events);
      placed = true;
    }
    return placed;
  }

  // Forward first (within the memory bounds), then B or I, then W; but a W that frees memory for a
  // forward that waits for nothing else goes before I.
  Choice choose(int r, double t) {
    Choice best;
    bool memory_bound = false;
    for (Kind kind : {Kind::F, Kind::BI, Kind::W}) {
      if (kind == Kind::BI && policy_.forward_first && forwards_left_[r] > 0) continue;
      if (best.pending && !(kind == Kind::W && memory_bound)) break;
      auto& list = pending_[r][int(kind)];
      for (size_t i = first_open_[r][int(kind)]; i < list.size(); ++i) {
        Pending& p = list[i];
        if (p.done) continue;
        double ready = ready_time(r, kind, p.stage, p.micro);
        if (kind == Kind::F && ready >= 0) {
          const bool input_ok = policy_.input_cap.empty() || before_input_[r] < policy_.input_cap[r];
          if (!input_ok || in_flight_[r] >= policy_.cap[r]) {
            memory_bound = memory_bound || (input_ok && ready <= t + kEps);
            ready = -1.0;
          }
        }
        if (ready >= 0 && ready <= t + kEps) {
          best = {&p, kind};
          break;
        }
        if (policy_.strict_order) break;
      }
    }
    return best;
  }

  // Rank r starts the chosen action at time t: its list, its counts and the next events.
  void place(int r, const Choice& choice, double t, std::set<double>& events) {
    const Kind kind = choice.kind;
    Pending& p = *choice.pending;
    const Op op = kind == Kind::F ? Op::F : kind == Kind::W ? Op::W : split_ ? Op::I : Op::B;
    const double dur = op == Op::F ? c_.F : op == Op::B ? c_.B : op == Op::I ? c_.I : c_.W;
    const double end = t + dur;
    const size_t i = at(p.stage, p.micro);
    if (kind != Kind::W) (kind == Kind::F ? f_end_ : bi_end_)[i] = end;
    if (kind == Kind::F) {
      ++in_flight_[r];
      ++before_input_[r];
      --forwards_left_[r];
    } else {
      if (kind == Kind::BI) --before_input_[r];
      if (kind == Kind::W || !split_) --in_flight_[r];
    }
    p.done = true;
    auto& list = pending_[r][int(kind)];
    size_t& open = first_open_[r][int(kind)];
    while (open < list.size() && list[open].done) ++open;
    s_.ranks[r].push_back({op, p.stage, p.micro});
    free_at_[r] = end;
    events.insert(end);
    if (c_.comm > 0) events.insert(end + c_.comm);
    --left_;
  }

  const GreedyPolicy& policy_;
  const ActionCosts& c_;
  const bool split_;
  const int S_, m_;
  Schedule s_;
  // End times of each (stage, micro-batch)'s F and B-or-I once placed; -1 before.
  std::vector<double> f_end_, bi_end_;
  std::vector<std::array<std::vector<Pending>, 3>> pending_;  // [rank][kind], in policy order
  std::vector<std::array<size_t, 3>> first_open_;             // [rank][kind]: the first not done
  std::vector<int> forwards_left_, in_flight_, before_input_;  // [rank]
  std::vector<double> free_at_;                                // [rank]: when it is idle again
  size_t left_ = 0;                                            // actions still to place
};

}  // namespace

bool is_compute(Op op) { return op == Op::F || op == Op::B || op == Op::I || op == Op::W; }
bool is_backward_input(Op op) { return op == Op::B || op == Op::I; }

Schedule greedy_schedule(const std::string& name, int pp, int v, int m, std::vector<int> stage_rank,
                         const GreedyPolicy& policy) {
  Schedule s = GreedyRun(name, pp, v, m, std::move(stage_rank), policy).run();
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
