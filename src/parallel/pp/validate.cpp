// validate(): every problem of a pipeline schedule, one line each (shape, placement, completeness,
// order, matching sends and receives, activation slots), then a run that finds deadlocks.
#include <map>
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

}  // namespace

namespace {

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

}  // namespace

std::vector<std::string> validate(const Schedule& s, int max_slots) {
  Problems bad;
  const int S = s.stages(), m = s.microbatches;
  if (s.pp < 1 || s.virtual_stages < 1 || m < 1)
    return {"schedule " + s.name + ": pp " + str(s.pp) + ", virtual " + str(s.virtual_stages) + ", micro-batches " +
            str(m) + ": each must be at least 1"};
  if (int(s.ranks.size()) != s.pp)
    return {"schedule " + s.name + " has " + str(int(s.ranks.size())) + " rank lists but pp " + str(s.pp) +
            ": give one list per rank"};
  if (int(s.stage_rank.size()) != S)
    return {"schedule " + s.name + ": stage_rank has " + str(int(s.stage_rank.size())) +
            " entries but pp × virtual = " + str(S) + ": give each stage's rank"};
  for (int st = 0; st < S; ++st)
    if (s.stage_rank[st] < 0 || s.stage_rank[st] >= s.pp)
      return {"schedule " + s.name + ": stage " + str(st) + " is placed on rank " + str(s.stage_rank[st]) +
              ", which does not exist (pp " + str(s.pp) + ")"};
  for (int r = 0; r < s.pp; ++r)
    if (int(s.stages_of(r).size()) != s.virtual_stages)
      bad.push_back("rank " + str(r) + ": holds " + str(int(s.stages_of(r).size())) + " stages but virtual is " +
                    str(s.virtual_stages) + ": place virtual stages on every rank (stage_rank)");
  auto on = [&s](int st) { return s.stage_rank[st]; };

  // Where each action stands in its rank's list (first occurrence), and how often it occurs.
  std::map<std::tuple<int, int, int>, int> where, count;  // (op, stage, micro)
  for (int r = 0; r < s.pp; ++r) {
    for (int i = 0; i < int(s.ranks[r].size()); ++i) {
      const Action& a = s.ranks[r][i];
      const std::string head = "rank " + str(r) + ": " + to_string(a) + ": ";
      if (a.stage < 0 || a.stage >= S) {
        bad.push_back(head + "stage " + str(a.stage) + " does not exist (stages 0 to " + str(S - 1) + ")");
        continue;
      }
      if (a.micro < 0 || a.micro >= m) {
        bad.push_back(head + "micro-batch " + str(a.micro) + " does not exist (0 to " + str(m - 1) + ")");
        continue;
      }
      if (on(a.stage) != r) {
        bad.push_back(head + "stage " + str(a.stage) + " runs on rank " + str(on(a.stage)) + ", not rank " + str(r) +
                      ": move it to rank " + str(on(a.stage)) + "'s list");
        continue;
      }
      const bool fwd_msg = a.op == Op::SEND_F || a.op == Op::RECV_B;  // to or from the next stage
      if (!is_compute(a.op)) {
        const int peer = fwd_msg ? a.stage + 1 : a.stage - 1;
        if (peer < 0 || peer >= S) {
          bad.push_back(head + "stage " + str(a.stage) + " is the " + (peer < 0 ? "first" : "last") +
                        " stage: there is no stage to exchange with; remove it");
          continue;
        }
        if (on(peer) == r) {
          bad.push_back(head + "stages " + str(std::min(peer, a.stage)) + " and " + str(std::max(peer, a.stage)) +
                        " are both on rank " + str(r) + ": the tensor is handed over locally; remove it");
          continue;
        }
      }
      const auto key = std::make_tuple(int(a.op), a.stage, a.micro);
      if (++count[key] == 1) where[key] = i;
      if (count[key] == 2) bad.push_back(head + "appears more than once: each action runs once; remove the extra");
    }
  }
  auto has = [&](Op op, int st, int k) { return count.count({int(op), st, k}) > 0; };
  auto pos = [&](Op op, int st, int k) { return where.at({int(op), st, k}); };

  // Completeness, and order within a rank.
  for (int st = 0; st < S; ++st) {
    const int r = on(st);
    const std::string head = "rank " + str(r) + ": ";
    for (int k = 0; k < m; ++k) {
      const std::string F = act(Op::F, st, k), B = act(Op::B, st, k), I = act(Op::I, st, k), W = act(Op::W, st, k);
      if (!has(Op::F, st, k)) {
        bad.push_back(head + F + " is missing: stage " + str(st) + " must forward micro-batch " + str(k) + " once");
        continue;
      }
      const bool b = has(Op::B, st, k), i = has(Op::I, st, k), w = has(Op::W, st, k);
      if (b && (i || w)) {
        bad.push_back(head + B + " and " + (i ? I : W) +
                      " both present: run the backward whole (B) or split (I then W)");
        continue;
      }
      if (!b && !i && !w) {
        bad.push_back(head + B + " is missing (or " + I + " and " + W + "): stage " + str(st) +
                      " must backward micro-batch " + str(k) + " once");
        continue;
      }
      if (i != w && !b) {
        bad.push_back(head + (i ? W : I) + " is missing: " + (i ? I : W) + " needs its other half of the backward");
        continue;
      }
      const Op back = b ? Op::B : Op::I;
      const std::string BI = act(back, st, k);
      if (pos(back, st, k) < pos(Op::F, st, k))
        bad.push_back(head + BI + " comes before " + F + ": a backward needs its forward first; move it after");
      if (w && pos(Op::W, st, k) < pos(Op::I, st, k))
        bad.push_back(head + W + " comes before " + I +
                      ": the weight gradient needs the input-gradient pass "
                      "(its output gradient) first; move it after " +
                      I);
      // The forward's input and the backward's output gradient.
      if (st > 0) {
        if (on(st - 1) == r) {
          const std::string P = act(Op::F, st - 1, k);
          if (has(Op::F, st - 1, k) && pos(Op::F, st - 1, k) > pos(Op::F, st, k))
            bad.push_back(head + F + " comes before " + P + ", whose output is its input: move it after");
        } else if (has(Op::RECV_F, st, k) && pos(Op::RECV_F, st, k) > pos(Op::F, st, k)) {
          bad.push_back(head + F + " comes before " + act(Op::RECV_F, st, k) + ": receive the input first");
        }
      }
      if (st < S - 1) {
        if (on(st + 1) == r) {
          for (Op nb : {Op::B, Op::I})
            if (has(nb, st + 1, k) && pos(nb, st + 1, k) > pos(back, st, k))
              bad.push_back(head + BI + " comes before " + act(nb, st + 1, k) +
                            ", which makes its output gradient: move it after");
        } else if (has(Op::RECV_B, st, k) && pos(Op::RECV_B, st, k) > pos(back, st, k)) {
          bad.push_back(head + BI + " comes before " + act(Op::RECV_B, st, k) + ": receive the output gradient first");
        }
      }
      if (has(Op::SEND_F, st, k) && pos(Op::SEND_F, st, k) < pos(Op::F, st, k))
        bad.push_back(head + act(Op::SEND_F, st, k) + " comes before " + F + ": send the output after computing it");
      if (has(Op::SEND_B, st, k) && pos(Op::SEND_B, st, k) < pos(back, st, k))
        bad.push_back(head + act(Op::SEND_B, st, k) + " comes before " + BI +
                      ": send the input gradient after computing it");
    }
  }

  // Sends and receives in pairs: stage st's output (SEND_F st → RECV_F st+1) and input gradient
  // (SEND_B st → RECV_B st-1), between stages on different ranks.
  for (int st = 0; st + 1 < S; ++st) {
    if (on(st) == on(st + 1)) continue;
    for (int k = 0; k < m; ++k)
      for (bool backward : {false, true}) {
        const int from = backward ? st + 1 : st, to = backward ? st : st + 1;
        const Op so = backward ? Op::SEND_B : Op::SEND_F, ro = backward ? Op::RECV_B : Op::RECV_F;
        const std::string snd = act(so, from, k), rcv = act(ro, to, k);
        const std::string what = backward ? "the output gradient" : "the input";
        const bool hs = has(so, from, k), hr = has(ro, to, k);
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

  if (max_slots >= 0) {
    const std::vector<int> slots = s.slots();
    for (int r = 0; r < s.pp; ++r) {
      if (slots[r] <= max_slots) continue;
      // The action at which the rank first goes over.
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

  if (bad.empty())
    for (std::string& d : find_deadlock(s)) bad.push_back(std::move(d));
  return std::move(bad).lines();
}

}  // namespace dtrain
