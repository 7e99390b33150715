// The dtrun agent (see agent.hpp). Store keys, under dtrun/<rdzv-id>/:
//   r<N>/node/<node rank> = workers on that node (rendezvous of round N)
//   r<N>/failed           = what failed in round N (every agent stops its workers)
//   r<N>/done/<node rank> = that node's workers all succeeded
// Workers use the same store under <rdzv-id>/r<N>/ (DTRAIN_STORE_PREFIX).
#include "launch/agent.hpp"

#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/cpu_share.hpp"
#include "core/descriptors.hpp"
#include "core/error.hpp"
#include "core/whole_number.hpp"
#include "comm/socket.hpp"
#include "comm/tcp_store.hpp"
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

struct Round {
  int world = 0;
  int first_rank = 0;  // this node's first global rank
};

class Agent {
 public:
  explicit Agent(const LaunchOptions& o) : o_(o) {}

  int run() {
    try {
      setup_store();
    } catch (const Error&) {
      if (!g_signal) throw;  // else: a node stopped while still waiting for node 0 (below)
    }
    for (int round = 0; !g_signal; ++round) {
      const Round r = rendezvous(round);
      const std::string failure = r.world > 0 ? run_round(round, r) : "signal";
      if (failure.empty()) return finish(round);
      if (g_signal) {
        say("stopped by signal " + std::to_string(g_signal) + " (" + strsignal(g_signal) + ")");
        return 128 + g_signal;
      }
      if (round >= o_.max_restarts) {
        say("error: the job failed: " + failure +
            (o_.max_restarts > 0 ? "; no restarts left (--max-restarts " + std::to_string(o_.max_restarts) + ")" : ""));
        return 1;
      }
      say("restarting all workers (restart " + std::to_string(round + 1) + " of " + std::to_string(o_.max_restarts) +
          "); they resume from the latest checkpoint");
    }
    say("stopped by signal " + std::to_string(g_signal) + " (" + strsignal(g_signal) + ")");
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
    } else if (o_.is_host.value_or(o_.node_rank == 0)) {
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
    auto client = std::make_shared<TcpStore>(host_, port_, token_, t, op, [] { return g_signal != 0; });
    store_ = std::make_shared<PrefixStore>(client, "dtrun/" + o_.rdzv_id + "/");
  }

  std::string key(int round, const std::string& rest) const { return "r" + std::to_string(round) + "/" + rest; }

  Round rendezvous(int round) {
    store_->set(key(round, "node/" + std::to_string(o_.node_rank)), std::to_string(o_.nproc_per_node));
    std::vector<std::string> keys;
    for (int n = 0; n < o_.nnodes; ++n) keys.push_back(key(round, "node/" + std::to_string(n)));
    // In slices, so that SIGINT/SIGTERM stop a rendezvous that waits for a node.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(o_.rdzv_timeout_s);
    std::vector<std::string> missing;
    do {
      missing = store_->wait(keys, Millis(500));
    } while (!missing.empty() && !g_signal && std::chrono::steady_clock::now() < until);
    if (g_signal) return {};
    if (!missing.empty()) {
      std::string nodes;
      for (const auto& m : missing) nodes += (nodes.empty() ? "" : ", ") + m.substr(m.rfind('/') + 1);
      throw Error("rendezvous '" + o_.rdzv_id + "' at " + host_ + ":" + std::to_string(port_) + ": node rank(s) " +
                  nodes + " did not arrive within " + std::to_string(o_.rdzv_timeout_s) +
                  " s; start dtrun on every node with the same --nnodes, --rdzv-endpoint and --rdzv-id");
    }
    Round r;
    for (int n = 0; n < o_.nnodes; ++n) {
      const std::string said = store_->try_get(keys[size_t(n)]).value_or("");
      const auto count = parse_whole(said, 1, 4096);  // --nproc-per-node's range
      require(count.has_value(), "rendezvous '" + o_.rdzv_id + "': node rank " + std::to_string(n) +
                                     " registered '" + said + "' workers, not a number of workers: start every node "
                                     "with the same dtrun (and another --rdzv-id for another job)");
      if (n < o_.node_rank) r.first_rank += int(*count);
      r.world += int(*count);
    }
    if (round == 0 && server_ && o_.nnodes > 1)  // on one node it says nothing new
      say("rendezvous '" + o_.rdzv_id + "' complete: " + std::to_string(o_.nnodes) + " node(s), " +
          std::to_string(r.world) + " workers, store at " + host_ + ":" + std::to_string(port_));
    return r;
  }

  std::vector<WorkerSpec> specs(int round, const Round& r) const {
    const CpuFacts cpus = read_cpu_facts();
    const CpuShare share = share_of(cpus, o_.nproc_per_node, /*shared=*/true);  // its workers share dtrun's mask
    std::vector<WorkerSpec> out;
    for (int l = 0; l < o_.nproc_per_node; ++l) {
      WorkerSpec s;
      s.rank = r.first_rank + l;
      s.local_rank = l;
      s.env = {{"RANK", std::to_string(s.rank)},
               {"LOCAL_RANK", std::to_string(l)},
               {"WORLD_SIZE", std::to_string(r.world)},
               {"LOCAL_WORLD_SIZE", std::to_string(o_.nproc_per_node)},
               {"GROUP_RANK", std::to_string(o_.node_rank)},
               {"ROLE_NAME", o_.role},
               {"ROLE_RANK", std::to_string(s.rank)},
               {"ROLE_WORLD_SIZE", std::to_string(r.world)},
               {"MASTER_ADDR", host_},
               {"MASTER_PORT", std::to_string(port_)},
               {"DTRAIN_AGENT", "1"},
               {"DTRAIN_JOB_TOKEN", token_},
               {"DTRAIN_STORE_PREFIX", o_.rdzv_id + "/r" + std::to_string(round) + "/"},
               {"DTRAIN_RESTART_COUNT", std::to_string(round)},
               {"TORCHELASTIC_RESTART_COUNT", std::to_string(round)}};
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

  // Runs one round to its end; returns "" on success, else what failed.
  std::string run_round(int round, const Round& r) {
    // Two pipes per worker (and a pair more while one starts), its log files; the store's host also
    // accepts every rank's two connections (store, heartbeat). Short of that, the job would hang.
    OutputPlan output = o_.output;
    output.attempt = round;
    require_free_descriptors(WorkerGroup::descriptors_per_worker(output) * o_.nproc_per_node + 2 +
                                 (server_ ? 2 * r.world : 0),
                             "dtrun cannot start " + std::to_string(o_.nproc_per_node) + " workers" +
                                 (server_ ? " and serve the store to " + std::to_string(r.world) + " ranks" : ""));
    WorkerGroup group(o_.command, specs(round, r), output);
    auto last_check = std::chrono::steady_clock::now();
    const std::string failed_key = key(round, "failed");
    for (;;) {
      for (const WorkerExit& e : group.poll(o_.monitor_interval_ms)) {
        if (e.ok()) continue;
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.1f", e.seconds);
        const std::string what = "rank " + std::to_string(e.rank) + " (local rank " + std::to_string(e.local_rank) +
                                 " on node " + std::to_string(o_.node_rank) + ", pid " + std::to_string(e.pid) + ") " +
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
        try_set(key(round, "done/" + std::to_string(o_.node_rank)), "1");
        return "";
      }
      if (g_signal) {
        try_set(failed_key, "dtrun on node " + std::to_string(o_.node_rank) + " got signal " + std::to_string(g_signal));
        group.stop(o_.stop_timeout_s);
        return "signal";
      }
      const auto now = std::chrono::steady_clock::now();
      if (o_.nnodes > 1 && now - last_check > Millis(500)) {
        last_check = now;
        std::string remote;
        try {
          remote = store_->try_get(failed_key).value_or("");
        } catch (const std::exception& e) {
          remote = "lost the rendezvous store (" + std::string(e.what()) + ")";
        }
        if (!remote.empty()) {
          say("another node failed (" + remote + "); stopping this node's workers");
          group.stop(o_.stop_timeout_s);
          return remote;
        }
      }
    }
  }

  // This node succeeded; the store's host waits for the other nodes before closing it.
  int finish(int round) {
    if (!server_ || o_.nnodes == 1) return 0;
    for (;;) {
      std::vector<std::string> keys;
      for (int n = 0; n < o_.nnodes; ++n) keys.push_back(key(round, "done/" + std::to_string(n)));
      if (store_->wait(keys, Millis(500)).empty()) return 0;
      if (auto f = store_->try_get(key(round, "failed"))) {
        say("error: the job failed on another node: " + *f);
        return 1;
      }
      if (g_signal) return 128 + g_signal;
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
  std::shared_ptr<Store> store_;
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
