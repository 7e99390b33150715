// dtrun option parsing (see options.hpp).
#include "launch/options.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <tuple>

#include "core/error.hpp"
#include "core/whole_number.hpp"
#include "comm/socket.hpp"

namespace dtrain {

const char* kLaunchUsage = R"(dtrun — start a dtrain job's workers on this node (torchrun's options)

usage: dtrun [options] PROGRAM [ARGS...]
  --nproc-per-node N|auto   workers on this node (auto: one per core)            [1]
  --nnodes N                nodes in the job                                     [1]
  --node-rank R             this node's rank (default: SLURM_NODEID, or 0 on one node)
  --rdzv-endpoint HOST:PORT where the nodes meet                               [127.0.0.1:29500]
                            node rank 0 hosts the store there and listens on HOST's address
                            (127.0.0.1: reachable from this machine only), or on all addresses
                            when HOST is not this machine's or, with --nnodes > 1, is a name
                            that resolves here to loopback (/etc/hosts' "127.0.1.1 HOSTNAME")
  --rdzv-id ID              the job's name at the endpoint (e.g. $SLURM_JOB_ID)  [none]
  --standalone              one node, a free port on 127.0.0.1 and a fresh job token
  --max-restarts K          restart all workers up to K times after a failure    [0]
  --rdzv-timeout S          seconds nodes wait for each other                    [300]
  --stop-timeout S          seconds between SIGTERM and SIGKILL when stopping    [5]
  --no-tag                  do not prefix worker output with "[rank]:"
  --only-ranks R[,R...]     forward only these ranks' output
Workers get RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
MASTER_PORT, DTRAIN_JOB_TOKEN (from the environment, else generated) and DTRAIN_RESTART_COUNT;
OMP_NUM_THREADS defaults to cores / workers.
)";

namespace {

constexpr int kMaxWorkers = 4096;  // per node
constexpr int kMaxNodes = 65536;
constexpr int kWeek = 7 * 24 * 3600;  // seconds

// The value of an option (or variable) `opt`: a whole number from lo to hi, else one line naming both.
int to_int(const std::string& opt, const std::string& v, int lo, int hi) {
  const auto x = parse_whole(v, lo, hi);
  require(x.has_value(), opt + " '" + v + "' is not a whole number from " + std::to_string(lo) + " to " +
                             std::to_string(hi) + ": see `dtrun --help`");
  return int(*x);
}

}  // namespace

LaunchOptions parse_launch_options(int argc, char** argv) {
  LaunchOptions o;
  bool endpoint_given = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) break;  // PROGRAM starts here
    std::string value;
    const auto eq = a.find('=');
    bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    for (auto& c : a)
      if (c == '_') c = '-';  // torchrun accepts both spellings
    auto next = [&]() -> std::string {
      if (inline_value) return value;
      require(i + 1 < argc, a + " needs a value: see `dtrun --help`");
      return argv[++i];
    };
    if (a == "--help") return LaunchOptions{};
    if (a == "--nproc-per-node") {
      const std::string v = next();
      o.nproc_per_node = v == "auto" ? std::max(1, int(sysconf(_SC_NPROCESSORS_ONLN))) : to_int(a, v, 1, kMaxWorkers);
    } else if (a == "--nnodes") {
      o.nnodes = to_int(a, next(), 1, kMaxNodes);
    } else if (a == "--node-rank") {
      o.node_rank = to_int(a, next(), 0, kMaxNodes - 1);
    } else if (a == "--rdzv-endpoint") {
      std::tie(o.rdzv_host, o.rdzv_port) = parse_host_port(next(), "--rdzv-endpoint");
      endpoint_given = true;
    } else if (a == "--rdzv-id") {
      o.rdzv_id = next();
    } else if (a == "--standalone") {
      o.standalone = true;
    } else if (a == "--max-restarts") {
      o.max_restarts = to_int(a, next(), 0, 10000);
    } else if (a == "--rdzv-timeout") {
      o.rdzv_timeout_s = to_int(a, next(), 1, kWeek);
    } else if (a == "--stop-timeout") {
      o.stop_timeout_s = to_int(a, next(), 0, 3600);
    } else if (a == "--no-tag") {
      o.tag_output = false;
    } else if (a == "--only-ranks") {
      const std::string v = next();
      size_t k = 0;
      while (k <= v.size()) {
        size_t c = v.find(',', k);
        if (c == std::string::npos) c = v.size();
        o.only_ranks.push_back(to_int(a, v.substr(k, c - k), 0, kMaxWorkers * kMaxNodes - 1));
        k = c + 1;
      }
    } else {
      throw Error("unknown option " + a + ": see `dtrun --help`");
    }
  }
  for (; i < argc; ++i) o.command.push_back(argv[i]);
  require(!o.command.empty(), "no program to run: write e.g. `dtrun --nproc-per-node 4 dtrain train --config C`");
  if (o.standalone) {
    require(o.nnodes == 1, "--standalone runs one node: drop --nnodes or --standalone");
    require(!endpoint_given, "--standalone picks its own endpoint: drop --rdzv-endpoint or --standalone");
  }
  if (o.node_rank < 0) {
    const char* slurm = std::getenv("SLURM_NODEID");
    if (o.nnodes == 1) {
      o.node_rank = 0;
    } else {
      require(slurm && *slurm, "--nnodes " + std::to_string(o.nnodes) +
                                   " needs --node-rank on each node (or run dtrun under srun, which sets SLURM_NODEID)");
      o.node_rank = to_int("SLURM_NODEID", slurm, 0, kMaxNodes - 1);
    }
  }
  require(o.node_rank < o.nnodes, "--node-rank " + std::to_string(o.node_rank) + " is not below --nnodes " +
                                      std::to_string(o.nnodes));
  return o;
}

}  // namespace dtrain
