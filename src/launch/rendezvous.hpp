// A job's rendezvous over dtrun's store, fixed-size or elastic: agents join numbered rounds, the
// store's host closes each with membership.hpp's rule, watches every agent's heartbeat and sees
// agents that wait for the next round. Store keys, under dtrun/<rdzv-id>/:
//   agents               counter: an agent's number (its id, the order it came in)
//   agent/<id>           "hint workers name" (encode_joiner)
//   agent/<id>/beat      counter: its heartbeat, every --rdzv-conf keep_alive_interval seconds
//   round                the round the host opened last (where a newcomer starts)
//   r<R>/joined          counter; r<R>/join/<k> = the id of the k-th agent to join round R
//   r<R>/members         the members' ids in node-rank order, or "error: …" when R cannot be made
//   r<R>/change          what changed from round R-1 ("lost …; joined …"), "" when nothing did
//   ended                the job is over: agents still waiting to join leave (agent/<id>/left)
//   terms                the host's: "keep_alive_s attempts nproc_per_node command_digest"; every agent
//                        beats at the host's interval, and an elastic job's joiner must match the rest
//   turned_away          counter; turned_away/<k> = why the k-th agent refused to join (the host says it)
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launch/membership.hpp"
#include "launch/options.hpp"

namespace dtrain {

class Store;

class Rendezvous {
 public:
  // host: this agent hosts the store and decides the rounds. stopped: a signal came (waits end).
  Rendezvous(std::shared_ptr<Store> store, const LaunchOptions& o, bool host, const std::string& name,
             std::function<bool()> stopped);

  // The round an agent that comes in now joins first.
  int first_round();

  struct Outcome {
    std::vector<Joiner> members;  // in node-rank order
    int index = -1;               // this agent's node rank, -1: not a member (it waits for the next round)
    std::string change;           // from the previous round ("" : the same nodes, or the first round)
    std::string ended;            // the job ended while this agent waited: why
    bool stopped = false;         // a signal came while waiting
  };
  // Joins round R and waits until it closes. Error (every agent says it) when R cannot be made.
  Outcome join(int round);

  // Beats this agent's heartbeat when it is due (call often).
  void beat();

  // The store's host, while round R runs: a member whose heartbeat stopped ("" : none), leaving out
  // those in `done`; the live agents already waiting in round R+1.
  std::string lost_member(const std::vector<Joiner>& members, const std::vector<bool>& done);
  std::vector<Joiner> waiting(int next_round);
  // The store's host: a line for each agent that refused to join since the last call.
  void say_turned_away();
  // The store's host: the job is over; agents waiting to join leave (it waits up to 3 s for them).
  void end(const std::string& why);

  int64_t id() const { return id_; }
  double lost_after_s() const;  // silence after which an agent counts as lost

 private:
  using Clock = std::chrono::steady_clock;
  struct Beat {
    int64_t value = -1;
    Clock::time_point changed;
  };
  std::string key(int round, const std::string& rest) const { return "r" + std::to_string(round) + "/" + rest; }
  bool alive(int64_t id);                   // host: its heartbeat changed within lost_after_s()
  bool known(int64_t id, Joiner& out);      // an agent's record (cached)
  std::vector<Joiner> joiners(int round, int64_t& count);  // host: who joined round R so far
  Outcome decide(int round);                // host
  Outcome await(int round);                 // the others
  Outcome outcome_of(int round, const std::string& members_text);
  void take_host_terms(const std::string& name);  // the others: adopt the host's terms, or refuse to join

  std::shared_ptr<Store> store_;
  const LaunchOptions& o_;
  const bool host_;
  std::function<bool()> stopped_;
  int64_t id_ = 0;
  int round_ = 0;                      // the round joined last
  Clock::time_point last_beat_;
  std::map<int64_t, Beat> beats_;      // host: what it saw of each agent's heartbeat
  std::map<int64_t, Joiner> agents_;   // agent records read so far
  std::map<int, std::map<int64_t, int64_t>> join_slots_;  // round → join slot → agent id, read so far
  std::vector<Joiner> previous_;       // host: the last round's members
  int keep_alive_s_ = 5;               // the host's heartbeat interval, which every agent keeps
  int64_t turned_away_seen_ = 0;       // host: refusals said so far
};

}  // namespace dtrain
