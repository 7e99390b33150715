// The rendezvous protocol (see rendezvous.hpp).
#include "launch/rendezvous.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>

#include "comm/store.hpp"
#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/whole_number.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

constexpr Millis kTick(200);  // how often the host looks at an open round

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  size_t k = 0;
  while (k < text.size()) {
    size_t c = text.find(',', k);
    if (c == std::string::npos) c = text.size();
    const auto id = parse_whole(text.substr(k, c - k), 1, INT64_MAX);
    require(id.has_value(), "the rendezvous store holds a malformed member list '" + text +
                                "': another program uses this --rdzv-id; choose another one");
    ids.push_back(*id);
    k = c + 1;
  }
  return ids;
}

// What every agent of a job must share with the host: the heartbeat rule (the host judges each
// node's silence by its own), and for an elastic job's joiners the workers per node and the worker
// command, whose files (a config) count by their content: a node started otherwise would make a
// world that cannot split the batch, or ranks that disagree, and stop a healthy job.
std::string terms_of(const LaunchOptions& o) {
  std::string command;
  for (const std::string& arg : o.command) {
    std::error_code ec;
    if (fs::is_regular_file(arg, ec) && fs::file_size(arg, ec) <= (size_t(4) << 20)) {
      const std::string bytes = read_file(arg);
      command += "file:" + std::to_string(crc32c(bytes.data(), bytes.size()));
    } else {
      command += arg;
    }
    command += '\0';
  }
  return std::to_string(o.keep_alive_s) + " " + std::to_string(o.keep_alive_attempts) + " " +
         std::to_string(o.nproc_per_node) + " " + std::to_string(crc32c(command.data(), command.size()));
}

}  // namespace

Rendezvous::Rendezvous(std::shared_ptr<Store> store, const LaunchOptions& o, bool host, const std::string& name,
                       std::function<bool()> stopped)
    : store_(std::move(store)), o_(o), host_(host), stopped_(std::move(stopped)), keep_alive_s_(o.keep_alive_s) {
  if (host_) store_->set("terms", terms_of(o_));
  else take_host_terms(name);
  id_ = store_->add("agents", 1);
  Joiner me{id_, o_.node_rank, o_.nproc_per_node, name, true};
  store_->set("agent/" + std::to_string(id_), encode_joiner(me));
  agents_[id_] = me;
  last_beat_ = Clock::now() - std::chrono::hours(1);
  beat();
}

void Rendezvous::take_host_terms(const std::string& name) {
  const Millis wait(int64_t(o_.rdzv_timeout_s) * 1000);
  if (!store_->wait({"terms"}, wait).empty()) return;  // an older host: nothing to match
  std::istringstream host(store_->try_get("terms").value_or("")), mine(terms_of(o_));
  int interval = 0, attempts = 0, workers = 0, my_interval = 0, my_attempts = 0, my_workers = 0;
  std::string command, my_command;
  host >> interval >> attempts >> workers >> command;
  mine >> my_interval >> my_attempts >> my_workers >> my_command;
  if (interval > 0) keep_alive_s_ = interval;
  if (interval > 0 && (interval != my_interval || attempts != my_attempts))
    std::fprintf(stderr, "dtrun: note: this node beats every %d s, as the host's --rdzv-conf keep_alive_interval=%d,"
                 "keep_alive_max_attempt=%d say (it was given %d and %d): the host judges every node by its own\n",
                 interval, interval, attempts, my_interval, my_attempts);
  if (!o_.elastic()) return;
  std::string why;
  if (workers > 0 && workers != my_workers)
    why = "it has --nproc-per-node " + std::to_string(my_workers) + " and the job's nodes " + std::to_string(workers) +
          " (the world could no longer split the global batch)";
  else if (!command.empty() && command != my_command)
    why = "its worker command differs from the host's (another program, option or config file content; the ranks "
          "would disagree)";
  if (why.empty()) return;
  const int64_t k = store_->add("turned_away", 1);
  store_->set("turned_away/" + std::to_string(k), name + ": " + why);
  throw Error("this node cannot join the elastic job '" + o_.rdzv_id + "': " + why + "; start it with the same "
              "--nproc-per-node and command as the job's other nodes");
}

void Rendezvous::say_turned_away() {
  const int64_t n = store_->add("turned_away", 0);
  for (; turned_away_seen_ < n; ++turned_away_seen_) {
    const auto why = store_->try_get("turned_away/" + std::to_string(turned_away_seen_ + 1));
    if (why) std::fprintf(stderr, "dtrun: turned away node %s; the job goes on\n", why->c_str());
  }
}

double Rendezvous::lost_after_s() const {
  // A node stopping its workers (up to --stop-timeout) beats again only after: never lost for that.
  return std::max(double(o_.keep_alive_s) * o_.keep_alive_attempts, double(o_.stop_timeout_s + 2 * o_.keep_alive_s));
}

void Rendezvous::beat() {
  const auto now = Clock::now();
  if (now - last_beat_ < std::chrono::seconds(keep_alive_s_)) return;
  last_beat_ = now;
  store_->add("agent/" + std::to_string(id_) + "/beat", 1);
}

int Rendezvous::first_round() {
  if (host_) return 0;
  const auto r = store_->try_get("round");
  const auto n = r ? parse_whole(*r, 0, INT32_MAX) : std::optional<int64_t>(0);
  return n ? int(*n) : 0;
}

bool Rendezvous::alive(int64_t id) {
  if (id == id_) return true;
  const auto now = Clock::now();
  const int64_t value = store_->add("agent/" + std::to_string(id) + "/beat", 0);  // a counter: read by adding 0
  auto [it, fresh] = beats_.try_emplace(id, Beat{value, now});
  if (!fresh && value != it->second.value) it->second = {value, now};
  return std::chrono::duration<double>(now - it->second.changed).count() < lost_after_s();
}

bool Rendezvous::known(int64_t id, Joiner& out) {
  auto it = agents_.find(id);
  if (it == agents_.end()) {
    const auto text = store_->try_get("agent/" + std::to_string(id));
    Joiner j;
    if (!text) return false;
    require(decode_joiner(id, *text, j), "the rendezvous store holds a malformed agent record '" + *text +
                                             "': another program uses this --rdzv-id; choose another one");
    it = agents_.emplace(id, j).first;
  }
  out = it->second;
  return true;
}

std::vector<Joiner> Rendezvous::joiners(int round, int64_t& count) {
  count = store_->add(key(round, "joined"), 0);
  std::map<int64_t, int64_t>& slots = join_slots_[round];  // a slot, once written, never changes
  std::vector<Joiner> out;
  for (int64_t k = 1; k <= count; ++k) {
    auto slot = slots.find(k);
    if (slot == slots.end()) {
      const auto id_text = store_->try_get(key(round, "join/" + std::to_string(k)));
      if (!id_text) continue;  // counted, not yet written: seen at the next look
      const auto id = parse_whole(*id_text, 1, INT64_MAX);
      if (!id) continue;
      slot = slots.emplace(k, *id).first;
    }
    Joiner j;
    if (!known(slot->second, j)) continue;
    j.alive = alive(j.id);
    out.push_back(j);
  }
  return out;
}

Rendezvous::Outcome Rendezvous::join(int round) {
  round_ = round;
  if (host_) store_->set("round", std::to_string(round));
  const int64_t k = store_->add(key(round, "joined"), 1);
  store_->set(key(round, "join/" + std::to_string(k)), std::to_string(id_));
  return host_ ? decide(round) : await(round);
}

Rendezvous::Outcome Rendezvous::decide(int round) {
  const auto opened = Clock::now();
  auto last_join = opened;
  int64_t seen = 0;
  for (;;) {
    beat();
    say_turned_away();
    RoundView v;
    v.min_nodes = o_.min_nodes;
    v.max_nodes = o_.nnodes;
    int64_t count = 0;
    v.joined = joiners(round, count);
    if (count != seen) last_join = Clock::now();
    seen = count;
    v.previous = previous_;
    for (auto& p : v.previous) p.alive = alive(p.id);
    const auto now = Clock::now();
    v.since_last_join = std::chrono::duration<double>(now - last_join).count();
    v.waited = std::chrono::duration<double>(now - opened).count();
    v.last_call = o_.last_call_s;
    v.timeout = o_.rdzv_timeout_s;
    const Closing c = decide_round(v);
    if (!c.error.empty()) {
      store_->set(key(round, "members"), "error: " + c.error);
      end("the rendezvous failed");
      throw Error(c.error);
    }
    if (c.close) {
      std::string ids;
      for (const auto& m : c.members) ids += (ids.empty() ? "" : ",") + std::to_string(m.id);
      store_->set(key(round, "change"), previous_.empty() ? "" : describe_change(previous_, c.members));
      store_->set(key(round, "members"), ids);  // last: the others read the change once this is there
      previous_ = c.members;
      return outcome_of(round, ids);
    }
    if (stopped_()) return Outcome{{}, -1, "", "", true};
    std::this_thread::sleep_for(kTick);
  }
}

Rendezvous::Outcome Rendezvous::await(int round) {
  const std::string members = key(round, "members");
  for (;;) {
    beat();
    if (store_->wait({members}, Millis(500)).empty()) {
      const std::string text = store_->try_get(members).value_or("");
      if (text.rfind("error: ", 0) == 0) throw Error(text.substr(7));
      return outcome_of(round, text);
    }
    if (stopped_()) return Outcome{{}, -1, "", "", true};
    if (const auto ended = store_->try_get("ended")) {
      store_->set("agent/" + std::to_string(id_) + "/left", "1");
      return Outcome{{}, -1, "", *ended, false};
    }
  }
}

Rendezvous::Outcome Rendezvous::outcome_of(int round, const std::string& members_text) {
  Outcome out;
  for (int64_t id : parse_ids(members_text)) {
    Joiner j;
    require(known(id, j), "the rendezvous store names agent " + std::to_string(id) +
                              " as a member but holds no record of it: another program uses this --rdzv-id");
    if (id == id_) out.index = int(out.members.size());
    out.members.push_back(j);
  }
  out.change = store_->try_get(key(round, "change")).value_or("");
  return out;
}

std::string Rendezvous::lost_member(const std::vector<Joiner>& members, const std::vector<bool>& done) {
  for (size_t i = 0; i < members.size(); ++i) {
    if ((i < done.size() && done[i]) || alive(members[i].id)) continue;
    char s[32];
    std::snprintf(s, sizeof s, "%.0f", lost_after_s());
    return "node " + std::to_string(i) + " (" + members[i].name + ") was lost: no heartbeat from its dtrun for " + s +
           " s";
  }
  return "";
}

std::vector<Joiner> Rendezvous::waiting(int next_round) {
  int64_t count = 0;
  std::vector<Joiner> all = joiners(next_round, count), live;
  for (const auto& j : all)
    if (j.alive) live.push_back(j);
  return live;
}

void Rendezvous::end(const std::string& why) {
  try {
    store_->set("ended", why);
    // Agents waiting to join see it at their next look (await): give them that long, so that they
    // leave on "the job ended" rather than on a store that went away.
    const auto until = Clock::now() + std::chrono::seconds(3);
    for (;;) {
      bool all_left = true;
      for (const auto& j : waiting(round_ + 1))
        all_left = all_left && store_->try_get("agent/" + std::to_string(j.id) + "/left").has_value();
      if (all_left || Clock::now() > until) return;
      std::this_thread::sleep_for(kTick);
    }
  } catch (const std::exception&) {
  }
}

}  // namespace dtrain
