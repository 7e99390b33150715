// dtrun's command line: torchrun's options where they mean something for dtrun (the rest refused
// with one line), and dtrun's own: workers, nodes, rendezvous, restarts, output, what to run.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/log_level.hpp"
#include "launch/workers.hpp"

namespace dtrain {

// What dtrun prints (--log-level, DTRAIN_LOG_LEVEL: core/log_level.hpp): quiet: errors, warnings and
// the outcome of a non-zero exit; info: also its progress (the default); debug: also the rendezvous
// steps, each worker's command and environment, and each worker's exit.

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;                // nodes in the job; an elastic job's most (--nnodes MIN:MAX's MAX)
  int min_nodes = 1;             // an elastic job's fewest (MIN); = nnodes for a fixed-size job
  // -1: from SLURM_NODEID, or 0 on one node. An elastic job numbers its nodes at each rendezvous;
  // a node rank given (or SLURM's) then only orders them.
  int node_rank = -1;
  std::string rdzv_host = "127.0.0.1";
  int rdzv_port = 29500;
  std::string rdzv_id = "none";
  std::string rdzv_backend = "c10d";  // c10d or static: both are dtrun's own TCP rendezvous
  bool standalone = false;       // one node, a free port and a fresh token chosen here
  int max_restarts = 0;
  int rdzv_timeout_s = 300;      // how long nodes wait for each other
  int read_timeout_s = 0;        // a store operation's timeout (--rdzv-conf read_timeout); 0: rdzv_timeout_s
  std::optional<bool> is_host;   // host the store here (--rdzv-conf is_host); unset: node rank 0 does
                                 // (elastic, without node ranks: the node whose address is the endpoint's)
  int last_call_s = 30;          // elastic: once MIN nodes are in, how long the rendezvous waits for more
  int keep_alive_s = 5;          // seconds between an agent's heartbeats (keep_alive_interval; the host's rule)
  int keep_alive_attempts = 3;   // heartbeats missed before a node counts as lost (keep_alive_max_attempt)
  int stop_timeout_s = 5;        // SIGTERM → SIGKILL grace when stopping workers
  int save_timeout_s = 600;      // after SIGUSR1/SIGTERM, how long the workers may take to save and exit
  int monitor_interval_ms = 100; // how often the workers are checked (--monitor-interval)
  std::string role = "default";  // the workers' ROLE_NAME (--role)
  std::string bind = "none";     // --bind: none, or cores (each worker its own share of the mask)
  OutputPlan output;             // tags, rank filters, log files (--redirects, --tee)
  LogLevel log_level = LogLevel::info;  // --log-level, else DTRAIN_LOG_LEVEL; the workers get it too
  std::vector<std::string> notes;    // what was accepted but has no effect, said once at the start
  std::vector<std::string> elastic_keys;  // the --rdzv-conf keys given that only elastic jobs use
  std::vector<std::string> command;  // PROGRAM [ARGS...]
  bool elastic() const { return min_nodes < nnodes; }
};

// What the parser asks of the machine and the environment (tests give their own).
struct LaunchHost {
  std::function<int()> cpus;                       // --nproc-per-node cpu
  std::function<int(std::string* why_none)> gpus;  // --nproc-per-node gpu
  std::function<const char*(const char*)> getenv;  // SLURM_NODEID, DTRAIN_LOG_LEVEL
  static LaunchHost here();
};

// Parses argv[1..]; throws Error with usage hints. "--help" returns an empty command.
LaunchOptions parse_launch_options(int argc, char** argv, const LaunchHost& host = LaunchHost::here());
extern const char* kLaunchUsage;

}  // namespace dtrain
