// Who takes part in a round of a job's rendezvous: the rule the store's host applies to the agents
// that joined (close now, wait, or give up naming the lost nodes), their order as node ranks, and
// how a change of nodes is described. Pure: the store protocol around it is rendezvous.hpp's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

// An agent (a node) as it joined a round.
struct Joiner {
  int64_t id = 0;     // the agent's number: its order of arrival at the job (1, 2, …)
  int hint = -1;      // its --node-rank (or SLURM_NODEID); -1: none
  int workers = 1;    // its --nproc-per-node
  std::string name;   // "HOST (ADDRESS)"
  bool alive = true;  // its heartbeat is fresh
};

// What the store's host knows of round R while it is open.
struct RoundView {
  int min_nodes = 1, max_nodes = 1;  // --nnodes MIN:MAX (MIN = MAX: a fixed-size job)
  std::vector<Joiner> joined;        // in order of joining
  std::vector<Joiner> previous;      // round R-1's members (alive: their heartbeat now); empty at first
  double since_last_join = 0.0;      // seconds since the newest one joined
  double last_call = 30.0;           // --rdzv-conf last_call_timeout
  double waited = 0.0;               // seconds since the round opened
  double timeout = 300.0;            // --rdzv-timeout
};

struct Closing {
  bool close = false;
  std::vector<Joiner> members;  // in node-rank order, when close
  std::string error;            // the round cannot be made (past the timeout, or bad node ranks)
};

// The rule. A fixed-size job closes when all of its nodes are in (node ranks 0..N-1, each once).
// An elastic one closes with MAX live nodes at once; with at least MIN, once every live member of
// the previous round is back (a restart keeps the nodes it has without waiting) or, in the first
// round, last_call seconds after the newest arrival (or at the timeout). Past the timeout with fewer
// than MIN, it gives up naming the lost nodes. Members are ordered by node rank given, then arrival.
Closing decide_round(const RoundView& v);

// The members' workers in all, and the first global rank of member `index`.
int world_of(const std::vector<Joiner>& members);
int first_rank_of(const std::vector<Joiner>& members, size_t index);

// "node A (…) lost; node C (…) joined", "" when both rounds have the same nodes.
std::string describe_change(const std::vector<Joiner>& previous, const std::vector<Joiner>& members);

// "2 nodes, 4 workers"
std::string describe_size(const std::vector<Joiner>& members);

// Their names, "a (…), b (…)".
std::string names_of(const std::vector<Joiner>& joiners);

// A joiner as the store keeps it ("hint workers name") and back; false for a malformed one.
std::string encode_joiner(const Joiner& j);
bool decode_joiner(int64_t id, const std::string& text, Joiner& out);

}  // namespace dtrain
