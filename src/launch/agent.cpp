// The dtrun agent (see agent.hpp): rounds of rendezvous (rendezvous.hpp's keys) and, under
// dtrun/<rdzv-id>/, for the round N that runs:
//   r<N>/failed           = what failed in round N (every agent stops its workers)
//   r<N>/done/<node rank> = "1": that node's workers all succeeded; "saved": they saved a checkpoint
//                           on SIGUSR1/SIGTERM (some exited kExitSavedForRequeue, the rest 0)
// Workers use the same store under <rdzv-id>/r<N>/ (DTRAIN_STORE_PREFIX); the store's host sets
// <rdzv-id>/r<N>/new_nodes there when nodes wait to join (the workers stop after their next
// checkpoint, exiting with kExitForNewNodes).
#include "launch/agent.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "core/descriptors.hpp"
#include "core/error.hpp"
#include "core/host_name.hpp"
#include "core/job_exit.hpp"
#include "comm/socket.hpp"
#include "comm/tcp_store.hpp"
#include "launch/endpoint.hpp"
#include "launch/rendezvous.hpp"
#include "launch/worker_env.hpp"
#include "launch/workers.hpp"

namespace dtrain {

namespace {

using Clock = std::chrono::steady_clock;

// SIGINT and SIGHUP stop the workers at once. SIGUSR1 and SIGTERM (SLURM's warning before the time
// limit, preemption) are forwarded to them: they save a checkpoint and exit kExitSavedForRequeue.
volatile sig_atomic_t g_stop_signal = 0;         // the last SIGINT or SIGHUP
volatile sig_atomic_t g_save_signal = 0;         // the last SIGUSR1 or SIGTERM
volatile sig_atomic_t g_save_count[2] = {0, 0};  // how many SIGUSR1, SIGTERM came: each is forwarded
constexpr int kSaveSignals[2] = {SIGUSR1, SIGTERM};

void on_signal(int sig) {
  if (sig != SIGUSR1 && sig != SIGTERM) {
    g_stop_signal = sig;
    return;
  }
  g_save_signal = sig;
  const int k = sig == SIGUSR1 ? 0 : 1;
  g_save_count[k] = g_save_count[k] + 1;
}

bool signalled() { return g_stop_signal != 0 || g_save_signal != 0; }

// "signal 10 (SIGUSR1)"
std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return "signal " + std::to_string(sig) + " (SIG" + (abbrev ? abbrev : "?") + ")";
}

LogLevel g_level = LogLevel::info;  // --log-level

// dtrun's lines on stderr. say: errors, warnings (notes) and the outcome of a non-zero exit, at every
// level; info: its progress, unless quiet; debug: the rendezvous and each worker's start and exit.
void say(const std::string& s) {
  std::fprintf(stderr, "dtrun: %s\n", s.c_str());
  std::fflush(stderr);
}
void info(const std::string& s) {
  if (g_level != LogLevel::quiet) say(s);
}
void debug(const std::string& s) {
  if (g_level == LogLevel::debug) say("debug: " + s);
}

// run_round's results that are no failure of a worker: the workers stopped to take nodes in; they
// saved a checkpoint on a SIGUSR1/SIGTERM (kExitSavedForRequeue); they were killed by it instead.
const char* const kResize = "new nodes";
const char* const kSaved = "saved";
const char* const kUnsaved = "killed by the signal forwarded";

class Agent {
 public:
  explicit Agent(const LaunchOptions& o) : o_(o) {}

  int run() {
    try {
      setup_store();
    } catch (const Error&) {
      if (!signalled()) throw;  // else: a node stopped while still waiting for node 0 (below)
    }
    if (!signalled()) {
      const std::string name = host_name() + " (" + client_->local_address() + ")";
      rdzv_ = std::make_unique<Rendezvous>(store_, o_, server_ != nullptr, name, [] { return signalled(); });
    }
    bool said_waiting = false, said_complete = false;
    for (int round = signalled() ? 0 : rdzv_->first_round(); !signalled(); ++round) {
      const Rendezvous::Outcome r = rdzv_->join(round);
      if (r.stopped) break;
      debug(describe_round(round, r));
      if (!r.ended.empty()) {
        info("the job ended (" + r.ended + ") before this node could join it");
        return 0;
      }
      if (r.index < 0) {
        if (!said_waiting) say_waiting(r);
        said_waiting = true;
        continue;
      }
      said_waiting = false;
      announce(r, said_complete);
      said_complete = true;
      if (signalled()) break;
      const std::string failure = run_round(round, r);
      if (failure.empty() || failure == kSaved) return finish(round, r, failure == kSaved);
      if (g_stop_signal) break;
      if (failure == kResize) {
        info("restarting the workers to take in the waiting node(s); they resume from the checkpoint just written");
        continue;
      }
      const int status = after_failure(round, failure);
      if (status >= 0) return status;
    }
    return stopped_by_signal();
  }

 private:
  // "round 0 (agent 1): members node 0 = a (10.0.0.1) with 4 workers, …; this node is node 0"
  std::string describe_round(int round, const Rendezvous::Outcome& r) const {
    std::string s = "round " + std::to_string(round) + " (agent " + std::to_string(rdzv_->id()) + "): ";
    if (!r.ended.empty()) return s + "the job ended: " + r.ended;
    s += "members";
    for (size_t i = 0; i < r.members.size(); ++i)
      s += std::string(i ? "," : "") + " node " + std::to_string(i) + " = " + r.members[i].name + " with " +
           std::to_string(r.members[i].workers) + " workers";
    return s + (r.index < 0 ? "; this node waits for the next round" : "; this node is node " + std::to_string(r.index));
  }

  void say_waiting(const Rendezvous::Outcome& r) const {
    info("waiting to join: the job runs on " + describe_size(r.members) + (int(r.members.size()) < o_.nnodes
            ? "; it takes this node in when it restarts after its next checkpoint"
            : ", its most (--nnodes " + (o_.elastic() ? std::to_string(o_.min_nodes) + ":" : std::string()) +
                  std::to_string(o_.nnodes) + "); this node joins if one is lost"));
  }

  // A round this node runs: a change of nodes, or the first round of several nodes (on one node it
  // says nothing new).
  void announce(const Rendezvous::Outcome& r, bool said_complete) const {
    if (!r.change.empty()) {
      info("membership: " + describe_size(r.members) + " (" + r.change + "); this node is node " +
          std::to_string(r.index) + ", the workers resume from the newest checkpoint");
    } else if (!said_complete && server_ && r.members.size() > 1) {
      info("rendezvous '" + o_.rdzv_id + "' complete: " + std::to_string(r.members.size()) + " node(s), " +
          std::to_string(world_of(r.members)) + " workers, store at " + host_port_text(host_, port_));
    }
  }

  // After a round that failed: dtrun's exit status, or -1 to restart the workers. Once a SIGUSR1 or
  // SIGTERM came, the job stops: no restart.
  int after_failure(int round, const std::string& failure) {
    if (failure == kUnsaved) {
      say("stopped by " + signal_name(g_save_signal) + ": the workers did not save a checkpoint (the signal " +
          "forwarded to them killed them: PROGRAM does not handle it)");
      if (server_) rdzv_->end("stopped by a signal");
      return 128 + g_save_signal;
    }
    if (g_save_signal) {
      say("error: the job failed while its workers were saving: " + failure + "; not restarted (dtrun got " +
          signal_name(g_save_signal) + ": the job stops)");
      if (server_) rdzv_->end("it failed");
      return 1;
    }
    bool final = false;  // a configuration error: every restart would meet it again
    try {
      final = store_->try_get(key(round, "final")).has_value();
    } catch (const std::exception&) {
    }
    if (final) {
      say("error: the job failed: " + failure + "; not restarted: a worker stopped on a configuration error, "
          "which every restart would meet again (its line above says what to fix)");
      if (server_) rdzv_->end("it failed on a configuration error");
      return 1;
    }
    const int restarts = failed_rounds(round);  // this one included
    if (restarts > o_.max_restarts) {
      say("error: the job failed: " + failure +
          (o_.max_restarts > 0 ? "; no restarts left (--max-restarts " + std::to_string(o_.max_restarts) + ")" : ""));
      if (server_) rdzv_->end("it failed");
      return 1;
    }
    info("restarting all workers (restart " + std::to_string(restarts) + " of " + std::to_string(o_.max_restarts) +
        "); they resume from the latest checkpoint");
    return -1;
  }

  // A signal came while no worker ran (in the rendezvous, or between rounds): SIGINT and SIGHUP
  // exit 128 + the signal; SIGUSR1 and SIGTERM had nothing to save, and the job may be requeued.
  int stopped_by_signal() {
    const bool saving = g_stop_signal == 0;
    const int sig = saving ? g_save_signal : g_stop_signal;
    if (saving)
      say("stopped by " + signal_name(sig) + " while no worker ran (in the rendezvous or between rounds): nothing " +
          "to save and nothing lost; requeue the job to go on (--resume auto)");
    else
      say("stopped by " + signal_name(sig));
    if (server_ && rdzv_) rdzv_->end("stopped by a signal");
    return saving ? kExitSavedForRequeue : 128 + sig;
  }

  void setup_store() {
    choose_token();
    port_ = o_.rdzv_port;
    if (o_.standalone) {
      host_ = "127.0.0.1";
      server_ = std::make_unique<TcpStoreServer>(host_, 0, token_);
      port_ = server_->port();
    } else {
      const std::vector<NetInterface> interfaces = list_interfaces();
      const bool hosting = hosts_store(interfaces);
      const ResolvedHost resolved = resolve_rendezvous_host(o_.rdzv_host, hosting, interfaces);
      host_ = resolved.address;  // used from here on: a name looked up again later could give another
      if (!resolved.how.empty())
        info("rendezvous endpoint " + host_port_text(o_.rdzv_host, port_) + " = " + host_port_text(host_, port_) +
             " (" + resolved.how + ")");
      if (hosting) serve_store(resolved.how.rfind("interface ", 0) == 0);
    }
    // Hosting the store, this process is also the end that accepts its own connection.
    require_free_descriptors(server_ ? 2 : 1, "dtrun cannot connect to the rendezvous store");
    const Millis t(int64_t(o_.rdzv_timeout_s) * 1000);
    const Millis op(int64_t(o_.read_timeout_s > 0 ? o_.read_timeout_s : o_.rdzv_timeout_s) * 1000);
    client_ = std::make_shared<TcpStore>(host_, port_, token_, t, op, [] { return signalled(); });
    store_ = std::make_shared<PrefixStore>(client_, "dtrun/" + o_.rdzv_id + "/");
    debug("rendezvous store at " + host_port_text(host_, port_) + ", hosted by " +
          (server_ ? "this node" : "another node (" + std::string(o_.is_host ? "--rdzv-conf is_host" : "node rank 0") + ")"));
  }

  // DTRAIN_JOB_TOKEN, else a random one on one node, else one from the rendezvous id and endpoint
  // as written (every node writes the same, whatever its name resolves to).
  void choose_token() {
    bool derived = false;
    token_ = job_token(o_, &derived);
    if (derived && o_.node_rank == 0)
      say("note: DTRAIN_JOB_TOKEN is not set, so the job token comes from --rdzv-id and the endpoint; export a "
          "secret DTRAIN_JOB_TOKEN on every node to keep other jobs and users out");
  }

  // Hosts the store on the endpoint's address (an interface's: exactly there), or on all addresses
  // when the name is not this machine's or, with other nodes, resolves here to loopback only.
  void serve_store(bool on_interface) {
    bool foreign = false;
    std::string at = on_interface ? host_ : listen_address(o_.rdzv_host, o_.nnodes == 1, "--rdzv-endpoint host", &foreign);
    // The name's own address comes in the resolver's order, which may be another family's than the one
    // every client connects to (localhost: ::1 against 127.0.0.1): listen on that one when it is ours.
    if (!at.empty() && at != host_ && listen_address(host_, true, "--rdzv-endpoint address", nullptr) == host_)
      at = host_;
    server_ = std::make_unique<TcpStoreServer>(at, port_, token_);
    if (foreign)
      say("note: --rdzv-endpoint host " + o_.rdzv_host + " is not an address of this machine, which hosts the store " +
          "(node rank " + std::to_string(o_.node_rank) + "); listening on all its addresses");
  }

  std::string key(int round, const std::string& rest) const { return "r" + std::to_string(round) + "/" + rest; }
  // Where round N's workers keep their keys in the store (DTRAIN_STORE_PREFIX).
  std::string workers_prefix(int round) const { return o_.rdzv_id + "/r" + std::to_string(round) + "/"; }

  // The job's failed rounds up to `round`: the restarts used, counted alike by every node, also by
  // one that joined later (a round taken to let nodes in is no failure).
  int failed_rounds(int round) {
    int n = 0;
    for (int r = 0; r <= round; ++r) n += store_->try_get(key(r, "failed")).has_value() ? 1 : 0;
    return n;
  }

  // Whether this node hosts the store: --rdzv-conf is_host, else node rank 0; an elastic job
  // without node ranks: the node the endpoint's address belongs to.
  bool hosts_store(const std::vector<NetInterface>& interfaces) const {
    if (o_.is_host) return *o_.is_host;
    if (o_.node_rank >= 0 || !o_.elastic()) return o_.node_rank == 0;
    std::string probe = o_.rdzv_host;  // an interface name of this machine: its address
    for (const NetInterface& i : interfaces)
      if (i.name == o_.rdzv_host && !i.ipv4.empty()) probe = i.ipv4;
    bool foreign = true;
    try {
      listen_address(probe, false, "--rdzv-endpoint host", &foreign);
    } catch (const Error&) {
    }
    if (foreign) return false;
    // The endpoint is this machine's, and nothing says which agent hosts: the first one there does;
    // an agent that finds the port already served joins that store (agents on one host).
    try {
      tcp_connect(probe, o_.rdzv_port, Millis(500));
      return false;
    } catch (const std::exception&) {
      return true;
    }
  }

  std::vector<WorkerSpec> specs(int round, const Rendezvous::Outcome& r) const {
    RoundPlace p;
    p.round = round;
    p.node = r.index;
    p.nodes = int(r.members.size());
    p.first_rank = first_rank_of(r.members, size_t(r.index));
    p.world = world_of(r.members);
    p.change = r.change;
    p.store_host = host_;
    p.store_port = port_;
    p.token = token_;
    p.store_prefix = workers_prefix(round);
    return worker_specs(o_, p);
  }

  // What one round's watch has seen so far.
  struct RoundWatch {
    RoundWatch(int n, const Rendezvous::Outcome& outcome) : round(n), r(outcome) {}
    int round;
    const Rendezvous::Outcome& r;
    bool resizing = false;  // a worker exited kExitForNewNodes: its peers stop at the same checkpoint
    bool saved = false;     // a worker exited kExitSavedForRequeue
    bool unsaved = false;   // a worker was killed by the SIGUSR1/SIGTERM forwarded to it
    bool asked = false;     // the store's host asked the workers to stop for waiting nodes
    int forwarded[2] = {0, 0};  // the SIGUSR1s and SIGTERMs forwarded so far
    std::optional<Clock::time_point> save_until;  // --save-timeout after the first one
    Clock::time_point last_check = Clock::now();
  };

  // Runs one round to its end; returns "" on success, kResize, kSaved or kUnsaved, else what failed.
  std::string run_round(int round, const Rendezvous::Outcome& r) {
    // Two pipes per worker (and a pair more while one starts), its log files; the store's host also
    // accepts every rank's two connections (store, heartbeat). Short of that, the job would hang.
    const int world = world_of(r.members);
    OutputPlan output = o_.output;
    output.attempt = round;
    require_free_descriptors(WorkerGroup::descriptors_per_worker(output) * o_.nproc_per_node + 2 +
                                 (server_ ? 2 * world : 0),
                             "dtrun cannot start " + std::to_string(o_.nproc_per_node) + " workers" +
                                 (server_ ? " and serve the store to " + std::to_string(world) + " ranks" : ""));
    std::vector<WorkerSpec> workers = specs(round, r);
    for (const WorkerSpec& spec : workers) debug(describe_worker_start(spec, o_.command));
    WorkerGroup group(o_.command, std::move(workers), output);
    RoundWatch w(round, r);
    for (;;) {
      rdzv_->beat();
      for (const WorkerExit& e : group.poll(o_.monitor_interval_ms)) {
        const std::string failure = on_worker_exit(w, e, group);
        if (!failure.empty()) return failure;
      }
      if (group.all_exited()) return round_outcome(w);
      if (g_stop_signal) {
        try_set(key(round, "failed"), "dtrun on node " + std::to_string(r.index) + " got " + signal_name(g_stop_signal));
        group.stop(o_.stop_timeout_s);
        return "signal";
      }
      std::string failure = g_save_signal ? keep_saving(w, group) : "";
      if (failure.empty()) failure = remote_failure(w);
      if (!failure.empty()) {
        group.stop(o_.stop_timeout_s);
        return failure;
      }
    }
  }

  // One worker's exit: "" when it is no failure (status 0, 75, 79, or killed by the signal forwarded
  // to it), else what failed: said, marked in the store, and the other workers stopped.
  std::string on_worker_exit(RoundWatch& w, const WorkerExit& e, WorkerGroup& group) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", e.seconds);
    debug("rank " + std::to_string(e.rank) + " (local rank " + std::to_string(e.local_rank) + ", pid " +
          std::to_string(e.pid) + ") " + e.describe() + " after " + secs + " s");
    const int code = WIFEXITED(e.status) ? WEXITSTATUS(e.status) : -1;
    const int sig = WIFSIGNALED(e.status) ? WTERMSIG(e.status) : 0;
    const bool killed_by_forwarded = w.save_until && (sig == SIGUSR1 || sig == SIGTERM);
    w.resizing = w.resizing || code == kExitForNewNodes;
    w.saved = w.saved || code == kExitSavedForRequeue;
    w.unsaved = w.unsaved || killed_by_forwarded;
    if (code == 0 || code == kExitForNewNodes || code == kExitSavedForRequeue || killed_by_forwarded) return "";
    if (code == kExitConfigError)
      try_set(key(w.round, "final"), "1");  // before `failed`: every node then stops without a restart
    const std::string what = "rank " + std::to_string(e.rank) + " (local rank " + std::to_string(e.local_rank) +
                             " on node " + std::to_string(w.r.index) + ", pid " + std::to_string(e.pid) + ") " +
                             e.describe() + " after " + secs + " s";
    say("error: " + what + "; stopping the other workers");
    // Lines just forwarded with its tag are not repeated: only those filtered, redirected or untagged.
    const std::string tail = group.tail(e.rank);
    if (!tail.empty()) std::fprintf(stderr, "dtrun: last output of rank %d:\n%s", e.rank, tail.c_str());
    try_set(key(w.round, "failed"), what);
    group.stop(o_.stop_timeout_s);
    return what;
  }

  // Every worker of the round exited, none of them failing.
  std::string round_outcome(const RoundWatch& w) {
    const std::string node = std::to_string(w.r.index);
    if (w.unsaved) {  // the other nodes stop theirs: the world can no longer agree on a checkpoint
      try_set(key(w.round, "failed"), "the workers on node " + node + " were killed by " + signal_name(g_save_signal));
      return kUnsaved;
    }
    if (w.saved) {
      try_set(key(w.round, "done/" + node), kSaved);
      return kSaved;
    }
    if (w.resizing) return kResize;
    try_set(key(w.round, "done/" + node), "1");
    return "";
  }

  // After a SIGUSR1 or SIGTERM: forwards each new one to the workers, which save a checkpoint and
  // exit; returns what failed when they still run --save-timeout after the first one.
  std::string keep_saving(RoundWatch& w, WorkerGroup& group) {
    for (int k = 0; k < 2; ++k) {
      const int count = g_save_count[k];
      if (count == w.forwarded[k]) continue;
      w.forwarded[k] = count;
      group.send(kSaveSignals[k]);
      if (w.save_until) continue;  // a second one does not shorten the wait
      w.save_until = Clock::now() + std::chrono::seconds(o_.save_timeout_s);
      info("got " + signal_name(kSaveSignals[k]) + ": forwarded to the workers, which save a checkpoint and stop; " +
          "waiting up to " + std::to_string(o_.save_timeout_s) + " s for them (--save-timeout)");
    }
    if (!w.save_until || Clock::now() < *w.save_until) return "";
    const std::string what = std::to_string(group.running()) + " worker(s) on node " + std::to_string(w.r.index) +
                             " still ran " + std::to_string(o_.save_timeout_s) + " s after " +
                             signal_name(g_save_signal) + " (--save-timeout)";
    say("error: " + what + "; stopping them (SIGTERM, then SIGKILL after --stop-timeout " +
        std::to_string(o_.stop_timeout_s) + " s)");
    try_set(key(w.round, "failed"), what);
    return what;
  }

  // What failed elsewhere, looked at twice a second when other nodes take part: another node's
  // failure, a node lost (the store's host watches heartbeats), or the store itself lost.
  std::string remote_failure(RoundWatch& w) {
    const auto now = Clock::now();
    if (now - w.last_check < Millis(500) || (w.r.members.size() == 1 && !o_.elastic())) return "";
    w.last_check = now;
    std::string remote;
    try {
      const std::string failed_key = key(w.round, "failed");
      remote = store_->try_get(failed_key).value_or("");
      if (remote.empty() && server_) {
        rdzv_->say_turned_away();
        remote = rdzv_->lost_member(w.r.members, {});
        if (!remote.empty()) store_->set(failed_key, remote);
        if (!w.asked && !w.save_until && remote.empty() && int(w.r.members.size()) < o_.nnodes)
          w.asked = ask_for_restart(w.round, w.r);
      }
    } catch (const std::exception& e) {
      remote = "lost the rendezvous store (" + std::string(e.what()) + ")";
    }
    if (!remote.empty())
      say((remote.rfind("node ", 0) == 0 ? remote : "another node failed (" + remote + ")") +
          "; stopping this node's workers");
    return remote;
  }

  // The store's host, while round N runs below --nnodes' MAX: when live nodes wait in round N+1,
  // tells the workers (their store's new_nodes key) to stop after their next checkpoint.
  bool ask_for_restart(int round, const Rendezvous::Outcome& r) {
    const std::vector<Joiner> waiting = rdzv_->waiting(round + 1);
    if (waiting.empty()) return false;
    const std::string names = names_of(waiting);
    client_->set(workers_prefix(round) + "new_nodes", names);
    info("node(s) " + names + " wait to join; the job restarts with them after its next checkpoint (now " +
        describe_size(r.members) + ")");
    return true;
  }

  // This node's workers are done (saved: some exited kExitSavedForRequeue, the others 0); the
  // store's host waits for the other nodes before closing it. Returns dtrun's exit status.
  int finish(int round, const Rendezvous::Outcome& r, bool saved) {
    if (server_) {
      const int status = wait_for_nodes(round, r, saved);
      if (status != 0) return status;
    }
    if (saved)
      say("the workers saved a checkpoint and stopped before the time limit (exit " +
          std::to_string(kExitSavedForRequeue) + "): requeue the job to go on (--resume auto)");
    if (server_) rdzv_->end(saved ? "its workers saved a checkpoint, to be requeued" : "it finished");
    return saved ? kExitSavedForRequeue : 0;
  }

  // The store's host: waits until every node's workers are done (`saved` becomes true when some
  // node's saved); 0, or 1 when another node failed, or 128 + SIGINT/SIGHUP.
  int wait_for_nodes(int round, const Rendezvous::Outcome& r, bool& saved) {
    const size_t n = r.members.size();
    for (;;) {
      std::vector<bool> done(n, false);
      bool all = true;
      for (size_t i = 0; i < n; ++i) {
        const auto d = store_->try_get(key(round, "done/" + std::to_string(i)));
        done[i] = d.has_value();
        saved = saved || (d && *d == kSaved);
        all = all && done[i];
      }
      if (all) return 0;
      std::string f = store_->try_get(key(round, "failed")).value_or("");
      if (f.empty()) f = rdzv_->lost_member(r.members, done);
      if (!f.empty()) {
        say("error: the job failed on another node: " + f);
        rdzv_->end("it failed");
        return 1;
      }
      if (g_stop_signal) return 128 + g_stop_signal;
      rdzv_->beat();
      std::this_thread::sleep_for(Millis(200));
    }
  }

  void try_set(const std::string& k, const std::string& v) {
    try {
      store_->set(k, v);
    } catch (const std::exception&) {
    }
  }

  const LaunchOptions& o_;
  std::string token_, host_;
  int port_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<TcpStore> client_;  // the connection to the store
  std::shared_ptr<Store> store_;      // its dtrun/<rdzv-id>/ keys
  std::unique_ptr<Rendezvous> rdzv_;
};

}  // namespace

int run_agent(const LaunchOptions& options) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  g_level = options.log_level;
  signal(SIGPIPE, SIG_IGN);
  const std::string problem = program_problem(options.command[0]);
  require(problem.empty(), "program " + options.command[0] + " " + problem +
                               ": give the path to dtrain, e.g. build/bin/dtrain");
  Agent a(options);
  return a.run();
}

}  // namespace dtrain
