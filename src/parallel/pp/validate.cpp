// validate(): every problem of a pipeline schedule, one line each (shape, placement, completeness,
// order, matching sends and receives, activation slots), then a run that finds deadlocks.
#include <map>
#include <optional>
#include <tuple>

#include "parallel/pp/schedule_detail.hpp"

namespace dtrain {

namespace {

using pp_detail::is_backward_input;
using pp_detail::is_compute;

std::string str(int x) { return std::to_string(x); }
std::string act(Op op, int stage, int micro) { return to_string(Action{op, stage, micro}); }

// Replays the lists (sends never block, receives wait for their send); the lists are otherwise
// valid (local order checked). Returns one line per rank that stops before its end.
std::vector<std::string> find_deadlock(const Schedule& s) {
  const std::vector<size_t> pos = pp_detail::replay(s, {}).pos;
  std::vector<std::string> out;
  for (int r = 0; r < s.pp; ++r) {
    if (pos[r] == s.ranks[r].size()) continue;
    const Action& a = s.ranks[r][pos[r]];
    const bool fwd = a.op == Op::RECV_F;
    const int from = fwd ? a.stage - 1 : a.stage + 1;
    out.push_back("deadlock: rank " + str(r) + " waits at " + to_string(a) + " (action " + str(int(pos[r]) + 1) +
                  " of its list) for " + act(fwd ? Op::SEND_F : Op::SEND_B, from, a.micro) + " of rank " +
                  str(s.stage_rank[from]) + ", which never comes: reorder so that every rank sends before it waits");
  }
  return out;
}

// The first kMaxProblemsListed problems, and a count of the rest.
struct Problems {
  std::vector<std::string> listed;
  int64_t more = 0;
  void push_back(std::string p) {
    if (listed.size() < kMaxProblemsListed) listed.push_back(std::move(p));
    else ++more;
  }
  bool empty() const { return listed.empty(); }
  std::vector<std::string> lines() && {
    if (more > 0) listed.push_back("… and " + std::to_string(more) + " more problems (the first " +
                                   std::to_string(kMaxProblemsListed) + " are listed)");
    return std::move(listed);
  }
};

// Where each action stands in its rank's list (first occurrence), and how often it occurs.
struct ActionIndex {
  std::map<std::tuple<int, int, int>, int> where, count;  // (op, stage, micro)
  bool has(Op op, int st, int k) const { return count.count({int(op), st, k}) > 0; }
  int pos(Op op, int st, int k) const { return where.at({int(op), st, k}); }
};

// The one problem of a schedule whose sizes or placement are too broken to check further, if any.
std::optional<std::string> shape_problem(const Schedule& s) {
  const int S = s.stages(), m = s.microbatches;
  if (s.pp < 1 || s.virtual_stages < 1 || m < 1)
    return "schedule " + s.name + ": pp " + str(s.pp) + ", virtual " + str(s.virtual_stages) + ", micro-batches " +
           str(m) + ": each must be at least 1";
  if (int(s.ranks.size()) != s.pp)
    return "schedule " + s.name + " has " + str(int(s.ranks.size())) + " rank lists but pp " + str(s.pp) +
           ": give one list per rank";
  if (int(s.stage_rank.size()) != S)
    return "schedule " + s.name + ": stage_rank has " + str(int(s.stage_rank.size())) +
           " entries but pp × virtual = " + str(S) + ": give each stage's rank";
  for (int st = 0; st < S; ++st)
    if (s.stage_rank[st] < 0 || s.stage_rank[st] >= s.pp)
      return "schedule " + s.name + ": stage " + str(st) + " is placed on rank " + str(s.stage_rank[st]) +
             ", which does not exist (pp " + str(s.pp) + ")";
  return std::nullopt;
}

void check_stages_per_rank(const Schedule& s, Problems& bad) {
  for (int r = 0; r < s.pp; ++r)
    if (int(s.stages_of(r).size()) != s.virtual_stages)
      bad.push_back("rank " + str(r) + ": holds " + str(int(s.stages_of(r).size())) + " stages but virtual is " +
                    str(s.virtual_stages) + ": place virtual stages on every rank (stage_rank)");
}

// Why action a cannot stand in rank r's list at all (its stage, micro-batch, rank or peer), if so.
std::optional<std::string> placement_problem(const Schedule& s, int r, const Action& a) {
  const int S = s.stages(), m = s.microbatches;
  auto on = [&s](int st) { return s.stage_rank[st]; };
  if (a.stage < 0 || a.stage >= S)
    return "stage " + str(a.stage) + " does not exist (stages 0 to " + str(S - 1) + ")";
  if (a.micro < 0 || a.micro >= m) return "micro-batch " + str(a.micro) + " does not exist (0 to " + str(m - 1) + ")";
  if (on(a.stage) != r)
    return "stage " + str(a.stage) + " runs on rank " + str(on(a.stage)) + ", not rank " + str(r) +
           ": move it to rank " + str(on(a.stage)) + "'s list";
  if (is_compute(a.op)) return std::nullopt;
  const bool fwd_msg = a.op == Op::SEND_F || a.op == Op::RECV_B;  // to or from the next stage
  const int peer = fwd_msg ? a.stage + 1 : a.stage - 1;
  if (peer < 0 || peer >= S)
    return "stage " + str(a.stage) + " is the " + (peer < 0 ? "first" : "last") +
           " stage: there is no stage to exchange with; remove it";
  if (on(peer) == r)
    return "stages " + str(std::min(peer, a.stage)) + " and " + str(std::max(peer, a.stage)) + " are both on rank " +
           str(r) + ": the tensor is handed over locally; remove it";
  return std::nullopt;
}

// Indexes every rank's list; the actions misplaced or repeated are problems (and left out).
ActionIndex index_actions(const Schedule& s, Problems& bad) {
  ActionIndex idx;
  for (int r = 0; r < s.pp; ++r) {
    for (int i = 0; i < int(s.ranks[r].size()); ++i) {
      const Action& a = s.ranks[r][i];
      const std::string head = "rank " + str(r) + ": " + to_string(a) + ": ";
      if (auto why = placement_problem(s, r, a)) {
        bad.push_back(head + *why);
        continue;
      }
      const auto key = std::make_tuple(int(a.op), a.stage, a.micro);
      if (++idx.count[key] == 1) idx.where[key] = i;
      if (idx.count[key] == 2) bad.push_back(head + "appears more than once: each action runs once; remove the extra");
    }
  }
  return idx;
}

// Why stage st's forward or backward of micro-batch k is missing, doubled or half there, if so.
std::optional<std::string> completeness_problem(const ActionIndex& idx, int st, int k) {
  const std::string F = act(Op::F, st, k), B = act(Op::B, st, k), I = act(Op::I, st, k), W = act(Op::W, st, k);
  if (!idx.has(Op::F, st, k))
    return F + " is missing: stage " + str(st) + " must forward micro-batch " + str(k) + " once";
  const bool b = idx.has(Op::B, st, k), i = idx.has(Op::I, st, k), w = idx.has(Op::W, st, k);
  if (b && (i || w)) return B + " and " + (i ? I : W) + " both present: run the backward whole (B) or split (I then W)";
  if (!b && !i && !w)
    return B + " is missing (or " + I + " and " + W + "): stage " + str(st) + " must backward micro-batch " + str(k) +
           " once";
  if (i != w && !b) return (i ? W : I) + " is missing: " + (i ? I : W) + " needs its other half of the backward";
  return std::nullopt;
}

// The order against the neighbouring stages: the forward's input, and the backward's (B or I:
// `back`) output gradient, made on this rank or received.
void check_neighbour_order(const Schedule& s, const ActionIndex& idx, int st, int k, Op back, Problems& bad) {
  auto on = [&s](int stage) { return s.stage_rank[stage]; };
  const int r = on(st);
  const std::string head = "rank " + str(r) + ": ", F = act(Op::F, st, k), BI = act(back, st, k);
  if (st > 0) {
    if (on(st - 1) == r) {
      const std::string P = act(Op::F, st - 1, k);
      if (idx.has(Op::F, st - 1, k) && idx.pos(Op::F, st - 1, k) > idx.pos(Op::F, st, k))
        bad.push_back(head + F + " comes before " + P + ", whose output is its input: move it after");
    } else if (idx.has(Op::RECV_F, st, k) && idx.pos(Op::RECV_F, st, k) > idx.pos(Op::F, st, k)) {
      bad.push_back(head + F + " comes before " + act(Op::RECV_F, st, k) + ": receive the input first");
    }
  }
  if (st < s.stages() - 1) {
    if (on(st + 1) == r) {
      for (Op nb : {Op::B, Op::I})
        if (idx.has(nb, st + 1, k) && idx.pos(nb, st + 1, k) > idx.pos(back, st, k))
          bad.push_back(head + BI + " comes before " + act(nb, st + 1, k) +
                        ", which makes its output gradient: move it after");
    } else if (idx.has(Op::RECV_B, st, k) && idx.pos(Op::RECV_B, st, k) > idx.pos(back, st, k)) {
      bad.push_back(head + BI + " comes before " + act(Op::RECV_B, st, k) + ": receive the output gradient first");
    }
  }
}

// Stage st's actions on micro-batch k: all there, and in an order that can run on its rank.
void check_micro_batch(const Schedule& s, const ActionIndex& idx, int st, int k, Problems& bad) {
  const std::string head = "rank " + str(s.stage_rank[st]) + ": ";
  if (auto why = completeness_problem(idx, st, k)) {
    bad.push_back(head + *why);
    return;
  }
  const std::string F = act(Op::F, st, k), I = act(Op::I, st, k), W = act(Op::W, st, k);
  const bool w = idx.has(Op::W, st, k);
  const Op back = idx.has(Op::B, st, k) ? Op::B : Op::I;
  const std::string BI = act(back, st, k);
  if (idx.pos(back, st, k) < idx.pos(Op::F, st, k))
    bad.push_back(head + BI + " comes before " + F + ": a backward needs its forward first; move it after");
  if (w && idx.pos(Op::W, st, k) < idx.pos(Op::I, st, k))
    bad.push_back(head + W + " comes before " + I +
                  ": the weight gradient needs the input-gradient pass "
                  "(its output gradient) first; move it after " +
                  I);
  check_neighbour_order(s, idx, st, k, back, bad);
  if (idx.has(Op::SEND_F, st, k) && idx.pos(Op::SEND_F, st, k) < idx.pos(Op::F, st, k))
    bad.push_back(head + act(Op::SEND_F, st, k) + " comes before " + F + ": send the output after computing it");
  if (idx.has(Op::SEND_B, st, k) && idx.pos(Op::SEND_B, st, k) < idx.pos(back, st, k))
    bad.push_back(head + act(Op::SEND_B, st, k) + " comes before " + BI +
                  ": send the input gradient after computing it");
}

// Sends and receives in pairs: stage st's output (SEND_F st → RECV_F st+1) and input gradient
// (SEND_B st → RECV_B st-1), between stages on different ranks.
void check_send_receive_pairs(const Schedule& s, const ActionIndex& idx, Problems& bad) {
  auto on = [&s](int st) { return s.stage_rank[st]; };
  for (int st = 0; st + 1 < s.stages(); ++st) {
    if (on(st) == on(st + 1)) continue;
    for (int k = 0; k < s.microbatches; ++k)
      for (bool backward : {false, true}) {
        const int from = backward ? st + 1 : st, to = backward ? st : st + 1;
        const Op so = backward ? Op::SEND_B : Op::SEND_F, ro = backward ? Op::RECV_B : Op::RECV_F;
        const std::string snd = act(so, from, k), rcv = act(ro, to, k);
        const std::string what = backward ? "the output gradient" : "the input";
        const bool hs = idx.has(so, from, k), hr = idx.has(ro, to, k);
        if (hs && !hr)
          bad.push_back("rank " + str(on(from)) + ": " + snd + " has no matching " + rcv + " on rank " + str(on(to)) +
                        ": add it there before stage " + str(to) + " needs it");
        else if (!hs && hr)
          bad.push_back("rank " + str(on(to)) + ": " + rcv + " has no matching " + snd + " on rank " + str(on(from)) +
                        ": add it there after the compute that makes it");
        else if (!hs && !hr)
          bad.push_back("rank " + str(on(to)) + ": " + rcv + " is missing, and " + snd + " on rank " + str(on(from)) +
                        ": stage " + str(to) + " needs " + what + " of micro-batch " + str(k));
      }
  }
}

// Each rank that holds more than max_slots activations of one stage at once: the action at which
// it first goes over.
void check_activation_slots(const Schedule& s, int max_slots, Problems& bad) {
  const std::vector<int> slots = s.slots();
  for (int r = 0; r < s.pp; ++r) {
    if (slots[r] <= max_slots) continue;
    std::map<int, int> inflight;
    const bool split = s.split_backward();
    for (const Action& a : s.ranks[r]) {
      if (a.op == Op::F && ++inflight[a.stage] > max_slots) {
        bad.push_back("rank " + str(r) + ": " + to_string(a) + ": stage " + str(a.stage) + " has " +
                      str(inflight[a.stage]) + " micro-batches in flight here (" + str(slots[r]) +
                      " at its peak), more than the " + str(max_slots) +
                      " activation slots allowed: backward earlier or use fewer micro-batches");
        break;
      }
      if (a.op == (split ? Op::W : Op::B)) --inflight[a.stage];
    }
  }
}

}  // namespace

std::vector<std::string> validate(const Schedule& s, int max_slots) {
  if (auto shape = shape_problem(s)) return {*shape};
  Problems bad;
  check_stages_per_rank(s, bad);
  const ActionIndex idx = index_actions(s, bad);
  // Completeness, and order within a rank.
  for (int st = 0; st < s.stages(); ++st)
    for (int k = 0; k < s.microbatches; ++k) check_micro_batch(s, idx, st, k, bad);
  check_send_receive_pairs(s, idx, bad);
  if (max_slots >= 0) check_activation_slots(s, max_slots, bad);
  if (bad.empty())
    for (std::string& d : find_deadlock(s)) bad.push_back(std::move(d));
  return std::move(bad).lines();
}

}  // namespace dtrain
