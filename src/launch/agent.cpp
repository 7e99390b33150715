// The dtrun agent (see agent.hpp): rounds of rendezvous (rendezvous.hpp's keys) and, under
// dtrun/<rdzv-id>/, for the round N that runs:
//   r<N>/failed           = what failed in round N (every agent stops its workers)
//   r<N>/done/<node rank> = that node's workers all succeeded
// Workers use the same store under <rdzv-id>/r<N>/ (DTRAIN_STORE_PREFIX); the store's host sets
// <rdzv-id>/r<N>/new_nodes there when nodes wait to join (the workers stop after their next
// checkpoint, exiting with kExitForNewNodes).
#include "launch/agent.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "core/cpu_share.hpp"
#include "core/descriptors.hpp"
#include "core/error.hpp"
#include "core/host_name.hpp"
#include "core/job_exit.hpp"
#include "comm/socket.hpp"
#include "comm/tcp_store.hpp"
#include "launch/rendezvous.hpp"
#include "launch/workers.hpp"

namespace dtrain {

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

// 128 random bits in hex (getrandom: no descriptor needed).
std::string random_token() {
  unsigned char b[16] = {0};
  ssize_t got = -1;
  do {
    got = ::getrandom(b, sizeof b, 0);
  } while (got < 0 && errno == EINTR);
  require(got == ssize_t(sizeof b), std::string("cannot draw a random job token (getrandom: ") +
                                        (got < 0 ? std::strerror(errno) : "short read") +
                                        "): export DTRAIN_JOB_TOKEN with a secret of your own");
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

void say(const std::string& s) {
  std::fprintf(stderr, "dtrun: %s\n", s.c_str());
  std::fflush(stderr);
}

const char* const kResize = "new nodes";  // run_round's result when the workers stopped to take nodes in

class Agent {
 public:
  explicit Agent(const LaunchOptions& o) : o_(o) {}

  int run() {
    try {
      setup_store();
    } catch (const Error&) {
      if (!g_signal) throw;  // else: a node stopped while still waiting for node 0 (below)
    }
    if (!g_signal) {
      const std::string name = host_name() + " (" + client_->local_address() + ")";
      rdzv_ = std::make_unique<Rendezvous>(store_, o_, server_ != nullptr, name, [] { return g_signal != 0; });
    }
    bool said_waiting = false, said_complete = false;
    for (int round = g_signal ? 0 : rdzv_->first_round(); !g_signal; ++round) {
      const Rendezvous::Outcome r = rdzv_->join(round);
      if (r.stopped) break;
      if (!r.ended.empty()) {
        say("the job ended (" + r.ended + ") before this node could join it");
        return 0;
      }
      if (r.index < 0) {
        if (!said_waiting)
          say("waiting to join: the job runs on " + describe_size(r.members) + (int(r.members.size()) < o_.nnodes
                  ? "; it takes this node in when it restarts after its next checkpoint"
                  : ", its most (--nnodes " + (o_.elastic() ? std::to_string(o_.min_nodes) + ":" : std::string()) +
                        std::to_string(o_.nnodes) + "); this node joins if one is lost"));
        said_waiting = true;
        continue;
      }
      said_waiting = false;
      if (!r.change.empty()) {
        say("membership: " + describe_size(r.members) + " (" + r.change + "); this node is node " +
            std::to_string(r.index) + ", the workers resume from the newest checkpoint");
      } else if (!said_complete && server_ && r.members.size() > 1) {  // on one node it says nothing new
        say("rendezvous '" + o_.rdzv_id + "' complete: " + std::to_string(r.members.size()) + " node(s), " +
            std::to_string(world_of(r.members)) + " workers, store at " + host_ + ":" + std::to_string(port_));
      }
      said_complete = true;
      const std::string failure = run_round(round, r);
      if (failure.empty()) return finish(round, r);
      if (g_signal) break;
      if (failure == kResize) {
        say("restarting the workers to take in the waiting node(s); they resume from the checkpoint just written");
        continue;
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
      say("restarting all workers (restart " + std::to_string(restarts) + " of " + std::to_string(o_.max_restarts) +
          "); they resume from the latest checkpoint");
    }
    say("stopped by signal " + std::to_string(g_signal) + " (" + strsignal(g_signal) + ")");
    if (server_ && rdzv_) rdzv_->end("stopped by a signal");
    return 128 + g_signal;
  }

 private:
  void setup_store() {
    const char* env_token = std::getenv("DTRAIN_JOB_TOKEN");
    if (env_token && *env_token) {
      token_ = env_token;
    } else if (o_.standalone || o_.nnodes == 1) {
      token_ = random_token();
    } else {
      token_ = "dtrun:" + o_.rdzv_id + "@" + o_.rdzv_host + ":" + std::to_string(o_.rdzv_port);
      if (o_.node_rank == 0)
        say("note: DTRAIN_JOB_TOKEN is not set, so the job token comes from --rdzv-id and the endpoint; export a "
            "secret DTRAIN_JOB_TOKEN on every node to keep other jobs and users out");
    }
    host_ = o_.rdzv_host;
    port_ = o_.rdzv_port;
    if (o_.standalone) {
      host_ = "127.0.0.1";
      server_ = std::make_unique<TcpStoreServer>(host_, 0, token_);
      port_ = server_->port();
    } else if (hosts_store()) {
      bool foreign = false;
      server_ = std::make_unique<TcpStoreServer>(listen_address(host_, o_.nnodes == 1, "--rdzv-endpoint host", &foreign),
                                                 port_, token_);
      if (foreign)
        say("note: --rdzv-endpoint host " + host_ + " is not an address of this machine, which hosts the store " +
            "(node rank " + std::to_string(o_.node_rank) + "); listening on all its addresses");
    }
    // Hosting the store, this process is also the end that accepts its own connection.
    require_free_descriptors(server_ ? 2 : 1, "dtrun cannot connect to the rendezvous store");
    const Millis t(int64_t(o_.rdzv_timeout_s) * 1000);
    const Millis op(int64_t(o_.read_timeout_s > 0 ? o_.read_timeout_s : o_.rdzv_timeout_s) * 1000);
    client_ = std::make_shared<TcpStore>(host_, port_, token_, t, op, [] { return g_signal != 0; });
    store_ = std::make_shared<PrefixStore>(client_, "dtrun/" + o_.rdzv_id + "/");
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
  bool hosts_store() const {
    if (o_.is_host) return *o_.is_host;
    if (o_.node_rank >= 0 || !o_.elastic()) return o_.node_rank == 0;
    bool foreign = true;
    try {
      listen_address(o_.rdzv_host, false, "--rdzv-endpoint host", &foreign);
    } catch (const Error&) {
    }
    if (foreign) return false;
    // The endpoint is this machine's, and nothing says which agent hosts: the first one there does;
    // an agent that finds the port already served joins that store (agents on one host).
    try {
      tcp_connect(o_.rdzv_host, o_.rdzv_port, Millis(500));
      return false;
    } catch (const std::exception&) {
      return true;
    }
  }

  std::vector<WorkerSpec> specs(int round, const Rendezvous::Outcome& r) const {
    const CpuFacts cpus = read_cpu_facts();
    const CpuShare share = share_of(cpus, o_.nproc_per_node, /*shared=*/true);  // its workers share dtrun's mask
    std::vector<WorkerSpec> out;
    const int world = world_of(r.members);
    for (int l = 0; l < o_.nproc_per_node; ++l) {
      WorkerSpec s;
      s.rank = first_rank_of(r.members, size_t(r.index)) + l;
      s.local_rank = l;
      s.env = {{"RANK", std::to_string(s.rank)},
               {"LOCAL_RANK", std::to_string(l)},
               {"WORLD_SIZE", std::to_string(world)},
               {"LOCAL_WORLD_SIZE", std::to_string(o_.nproc_per_node)},
               {"GROUP_RANK", std::to_string(r.index)},
               {"ROLE_NAME", o_.role},
               {"ROLE_RANK", std::to_string(s.rank)},
               {"ROLE_WORLD_SIZE", std::to_string(world)},
               {"MASTER_ADDR", host_},
               {"MASTER_PORT", std::to_string(port_)},
               {"DTRAIN_AGENT", "1"},
               {"DTRAIN_JOB_TOKEN", token_},
               {"DTRAIN_STORE_PREFIX", workers_prefix(round)},
               {"DTRAIN_RESTART_COUNT", std::to_string(round)},
               {"TORCHELASTIC_RESTART_COUNT", std::to_string(round)},
               {"DTRAIN_NODES", std::to_string(r.members.size())}};
      if (o_.elastic()) s.env["DTRAIN_ELASTIC"] = std::to_string(o_.min_nodes) + ":" + std::to_string(o_.nnodes);
      if (!r.change.empty()) s.env["DTRAIN_MEMBERSHIP"] = r.change;
      const char* have = std::getenv("OMP_NUM_THREADS");
      if (o_.bind == "cores") s.cpus = cpus_of_worker(cpus.mask, l, o_.nproc_per_node);
      if (!have || !*have) {
        s.env["OMP_NUM_THREADS"] = std::to_string(s.cpus.empty() ? share.threads : int(s.cpus.size()));
        s.env["DTRAIN_THREADS_WHY"] = s.cpus.empty() ? "set by dtrun: " + share.why
                                                     : "set by dtrun --bind cores: CPUs " + format_cpu_list(s.cpus);
      }
      if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) s.env["OMP_WAIT_POLICY"] = "PASSIVE";
      out.push_back(std::move(s));
    }
    return out;
  }

  // Runs one round to its end; returns "" on success, kResize when the workers stopped at a
  // checkpoint to take waiting nodes in, else what failed.
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
    WorkerGroup group(o_.command, specs(round, r), output);
    auto last_check = std::chrono::steady_clock::now();
    const std::string failed_key = key(round, "failed");
    bool resizing = false, asked = false;
    for (;;) {
      rdzv_->beat();
      for (const WorkerExit& e : group.poll(o_.monitor_interval_ms)) {
        if (e.ok()) continue;
        if (WIFEXITED(e.status) && WEXITSTATUS(e.status) == kExitForNewNodes) {
          resizing = true;  // its peers stop at the same checkpoint
          continue;
        }
        if (WIFEXITED(e.status) && WEXITSTATUS(e.status) == kExitConfigError)
          try_set(key(round, "final"), "1");  // before `failed`: every node then stops without a restart
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.1f", e.seconds);
        const std::string what = "rank " + std::to_string(e.rank) + " (local rank " + std::to_string(e.local_rank) +
                                 " on node " + std::to_string(r.index) + ", pid " + std::to_string(e.pid) + ") " +
                                 e.describe() + " after " + secs + " s";
        say("error: " + what + "; stopping the other workers");
        // Lines just forwarded with its tag are not repeated: only those filtered, redirected or untagged.
        const std::string tail = group.tail(e.rank);
        if (!tail.empty()) std::fprintf(stderr, "dtrun: last output of rank %d:\n%s", e.rank, tail.c_str());
        try_set(failed_key, what);
        group.stop(o_.stop_timeout_s);
        return what;
      }
      if (group.all_exited()) {
        if (resizing) return kResize;
        try_set(key(round, "done/" + std::to_string(r.index)), "1");
        return "";
      }
      if (g_signal) {
        try_set(failed_key, "dtrun on node " + std::to_string(r.index) + " got signal " + std::to_string(g_signal));
        group.stop(o_.stop_timeout_s);
        return "signal";
      }
      const auto now = std::chrono::steady_clock::now();
      if (now - last_check < Millis(500) || (r.members.size() == 1 && !o_.elastic())) continue;
      last_check = now;
      std::string remote;
      try {
        remote = store_->try_get(failed_key).value_or("");
        if (remote.empty() && server_) {
          rdzv_->say_turned_away();
          remote = rdzv_->lost_member(r.members, {});
          if (!remote.empty()) store_->set(failed_key, remote);
          if (!asked && remote.empty() && int(r.members.size()) < o_.nnodes) asked = ask_for_restart(round, r);
        }
      } catch (const std::exception& e) {
        remote = "lost the rendezvous store (" + std::string(e.what()) + ")";
      }
      if (!remote.empty()) {
        say((remote.rfind("node ", 0) == 0 ? remote : "another node failed (" + remote + ")") +
            "; stopping this node's workers");
        group.stop(o_.stop_timeout_s);
        return remote;
      }
    }
  }

  // The store's host, while round N runs below --nnodes' MAX: when live nodes wait in round N+1,
  // tells the workers (their store's new_nodes key) to stop after their next checkpoint.
  bool ask_for_restart(int round, const Rendezvous::Outcome& r) {
    const std::vector<Joiner> waiting = rdzv_->waiting(round + 1);
    if (waiting.empty()) return false;
    const std::string names = names_of(waiting);
    client_->set(workers_prefix(round) + "new_nodes", names);
    say("node(s) " + names + " wait to join; the job restarts with them after its next checkpoint (now " +
        describe_size(r.members) + ")");
    return true;
  }

  // This node succeeded; the store's host waits for the other nodes before closing it.
  int finish(int round, const Rendezvous::Outcome& r) {
    if (!server_) return 0;
    const size_t n = r.members.size();
    for (;;) {
      std::vector<bool> done(n, false);
      bool all = true;
      for (size_t i = 0; i < n; ++i) {
        done[i] = store_->try_get(key(round, "done/" + std::to_string(i))).has_value();
        all = all && done[i];
      }
      if (all) {
        rdzv_->end("it finished");
        return 0;
      }
      std::string f = store_->try_get(key(round, "failed")).value_or("");
      if (f.empty()) f = rdzv_->lost_member(r.members, done);
      if (!f.empty()) {
        say("error: the job failed on another node: " + f);
        rdzv_->end("it failed");
        return 1;
      }
      if (g_signal) return 128 + g_signal;
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
  signal(SIGPIPE, SIG_IGN);
  const std::string problem = program_problem(options.command[0]);
  require(problem.empty(), "program " + options.command[0] + " " + problem +
                               ": give the path to dtrain, e.g. build/bin/dtrain");
  Agent a(options);
  return a.run();
}

}  // namespace dtrain
