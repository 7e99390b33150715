// dtrun's command line: how many workers, on how many nodes, where they meet, how often to
// restart, and what to run.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = -1;            // -1: from SLURM_NODEID, or 0 on one node
  std::string rdzv_host = "127.0.0.1";
  int rdzv_port = 29500;
  std::string rdzv_id = "none";
  bool standalone = false;       // one node, a free port and a fresh token chosen here
  int max_restarts = 0;
  int rdzv_timeout_s = 300;      // how long nodes wait for each other
  int stop_timeout_s = 5;        // SIGTERM → SIGKILL grace when stopping workers
  bool tag_output = true;        // prefix every worker line with its rank
  std::vector<int> only_ranks;   // forward only these ranks' output (empty: all)
  std::vector<std::string> command;  // PROGRAM [ARGS...]
};

// Parses argv[1..]; throws Error with usage hints. "--help" returns an empty command.
LaunchOptions parse_launch_options(int argc, char** argv);
extern const char* kLaunchUsage;

}  // namespace dtrain
