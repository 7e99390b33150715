// The rendezvous rule (see membership.hpp).
#include "launch/membership.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <set>

#include "core/whole_number.hpp"

namespace dtrain {

namespace {

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f s", s);
  return b;
}

bool contains(const std::vector<Joiner>& v, int64_t id) {
  return std::any_of(v.begin(), v.end(), [&](const Joiner& j) { return j.id == id; });
}

void order(std::vector<Joiner>& v) {
  std::stable_sort(v.begin(), v.end(), [](const Joiner& a, const Joiner& b) {
    const int ha = a.hint < 0 ? INT_MAX : a.hint, hb = b.hint < 0 ? INT_MAX : b.hint;
    return ha != hb ? ha < hb : a.id < b.id;
  });
}

// A fixed-size job: node ranks 0..N-1, each from exactly one node.
Closing decide_fixed(const RoundView& v, const std::vector<Joiner>& live) {
  Closing c;
  std::set<int> seen;
  for (const auto& j : live) {
    if (j.hint < 0 || j.hint >= v.max_nodes || !seen.insert(j.hint).second) {
      c.error = j.hint < 0 || j.hint >= v.max_nodes
                    ? "node " + j.name + " has no node rank below " + std::to_string(v.max_nodes)
                    : "two nodes say they are node rank " + std::to_string(j.hint) + " (the second: " + j.name + ")";
      c.error += ": give each node its own --node-rank from 0 to " + std::to_string(v.max_nodes - 1);
      return c;
    }
  }
  if (int(live.size()) == v.max_nodes) {
    c.close = true;
    c.members = live;
    order(c.members);
    return c;
  }
  if (v.waited >= v.timeout) {
    std::string missing;
    for (int n = 0; n < v.max_nodes; ++n)
      if (!seen.count(n)) missing += (missing.empty() ? "" : ", ") + std::to_string(n);
    c.error = "node rank(s) " + missing + " did not arrive within " + seconds(v.timeout) +
              "; start dtrun on every node with the same --nnodes, --rdzv-endpoint and --rdzv-id";
  }
  return c;
}

}  // namespace

Closing decide_round(const RoundView& v) {
  std::vector<Joiner> live;
  for (const auto& j : v.joined)
    if (j.alive && !contains(live, j.id)) live.push_back(j);
  if (v.min_nodes == v.max_nodes) return decide_fixed(v, live);
  Closing c;
  const int n = int(live.size());
  bool close = n >= v.max_nodes;
  if (!close && n >= v.min_nodes) {
    bool all_back = !v.previous.empty();  // every live member of the previous round is in
    for (const auto& p : v.previous) all_back = all_back && (contains(live, p.id) || !p.alive);
    close = all_back || v.since_last_join >= v.last_call || v.waited >= v.timeout;
  }
  if (close) {
    // the previous round's members first, then by arrival, up to MAX
    std::vector<Joiner> pick = live;
    std::stable_sort(pick.begin(), pick.end(), [&](const Joiner& a, const Joiner& b) {
      return contains(v.previous, a.id) > contains(v.previous, b.id);
    });
    if (int(pick.size()) > v.max_nodes) pick.resize(size_t(v.max_nodes));
    order(pick);
    c.close = true;
    c.members = pick;
    return c;
  }
  if (v.waited >= v.timeout) {
    std::vector<Joiner> lost;
    for (const auto& p : v.previous)
      if (!contains(live, p.id)) lost.push_back(p);
    c.error = std::to_string(n) + " node(s) " + (n > 0 ? "(" + names_of(live) + ") " : "") +
              "joined within " + seconds(v.timeout) + ", fewer than the " + std::to_string(v.min_nodes) +
              " --nnodes " + std::to_string(v.min_nodes) + ":" + std::to_string(v.max_nodes) + " needs" +
              (lost.empty() ? "" : "; lost: " + names_of(lost)) +
              ": bring nodes back (start dtrun there with the same --rdzv-endpoint and --rdzv-id) or lower MIN";
  }
  return c;
}

int world_of(const std::vector<Joiner>& members) {
  int w = 0;
  for (const auto& m : members) w += m.workers;
  return w;
}

int first_rank_of(const std::vector<Joiner>& members, size_t index) {
  int r = 0;
  for (size_t i = 0; i < index && i < members.size(); ++i) r += members[i].workers;
  return r;
}

std::string describe_change(const std::vector<Joiner>& previous, const std::vector<Joiner>& members) {
  std::vector<Joiner> lost, joined;
  for (const auto& p : previous)
    if (!contains(members, p.id)) lost.push_back(p);
  for (const auto& m : members)
    if (!contains(previous, m.id)) joined.push_back(m);
  std::string s;
  if (!lost.empty()) s += "lost " + names_of(lost);
  if (!joined.empty()) s += (s.empty() ? "" : "; ") + std::string("joined ") + names_of(joined);
  return s;
}

std::string names_of(const std::vector<Joiner>& joiners) {
  std::string s;
  for (const auto& j : joiners) s += (s.empty() ? "" : ", ") + j.name;
  return s;
}

std::string describe_size(const std::vector<Joiner>& members) {
  const size_t n = members.size();
  return std::to_string(n) + (n == 1 ? " node, " : " nodes, ") + std::to_string(world_of(members)) +
         (world_of(members) == 1 ? " worker" : " workers");
}

std::string encode_joiner(const Joiner& j) {
  return std::to_string(j.hint) + " " + std::to_string(j.workers) + " " + j.name;
}

bool decode_joiner(int64_t id, const std::string& text, Joiner& out) {
  const size_t a = text.find(' ');
  const size_t b = a == std::string::npos ? a : text.find(' ', a + 1);
  if (b == std::string::npos) return false;
  const std::string hint = text.substr(0, a);
  const auto workers = parse_whole(text.substr(a + 1, b - a - 1), 1, 4096);
  std::optional<int64_t> h;
  if (hint == "-1") h = -1;
  else h = parse_whole(hint, 0, 65535);
  if (!workers || !h) return false;
  out = Joiner{id, int(*h), int(*workers), text.substr(b + 1), true};
  return true;
}

}  // namespace dtrain
