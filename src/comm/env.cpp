// Launcher environment detection (see env.hpp).
#include "comm/env.hpp"

#include <cstdint>
#include <cstdlib>

#include "core/error.hpp"
#include "core/whole_number.hpp"

namespace dtrain {

namespace {

constexpr int kMaxWorld = 1 << 30;

struct Vars {
  GetEnv get;
  const char* raw(const char* name) const {
    const char* v = get(name);
    return v && *v ? v : nullptr;
  }
  bool has(const char* name) const { return raw(name) != nullptr; }
  std::string str(const char* name, const std::string& dflt = "") const {
    const char* v = raw(name);
    return v ? std::string(v) : dflt;
  }
  // The variable as a whole number from lo to hi (dflt when unset); else one line naming both.
  int64_t num64(const char* name, int64_t dflt, int64_t lo, int64_t hi) const {
    const char* v = raw(name);
    if (!v) return dflt;
    const auto x = parse_whole(v, lo, hi);
    require(x.has_value(), std::string("environment variable ") + name + "='" + v + "' is not a whole number from " +
                               std::to_string(lo) + " to " + std::to_string(hi) + ": fix the launch line or unset it");
    return *x;
  }
  int num(const char* name, int dflt, int lo, int hi) const { return int(num64(name, dflt, lo, hi)); }
  // Ranks, counts and sizes of a job: the world holds at most kMaxWorld ranks.
  int rank(const char* name, int dflt) const { return num(name, dflt, 0, kMaxWorld - 1); }
  int count(const char* name, int dflt) const { return num(name, dflt, 1, kMaxWorld); }
};

}  // namespace

std::vector<std::string> expand_slurm_nodelist(const std::string& list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < list.size()) {
    // one item: prefix[ranges]suffix, items separated by commas outside brackets
    size_t j = i;
    int depth = 0;
    while (j < list.size() && (depth > 0 || list[j] != ',')) {
      if (list[j] == '[') ++depth;
      if (list[j] == ']') --depth;
      ++j;
    }
    const std::string item = list.substr(i, j - i);
    i = j + 1;
    const size_t lb = item.find('[');
    if (lb == std::string::npos) {
      if (!item.empty()) out.push_back(item);
      continue;
    }
    const size_t rb = item.find(']', lb);
    require(rb != std::string::npos, "SLURM node list '" + list + "' is malformed (unclosed '[')");
    const std::string prefix = item.substr(0, lb), suffix = item.substr(rb + 1);
    const std::string ranges = item.substr(lb + 1, rb - lb - 1);
    size_t k = 0;
    while (k <= ranges.size()) {
      size_t comma = ranges.find(',', k);
      if (comma == std::string::npos) comma = ranges.size();
      const std::string r = ranges.substr(k, comma - k);
      k = comma + 1;
      if (r.empty()) continue;
      const size_t dash = r.find('-');
      const std::string a = r.substr(0, dash), b = dash == std::string::npos ? a : r.substr(dash + 1);
      char* e1 = nullptr;
      char* e2 = nullptr;
      long lo = std::strtol(a.c_str(), &e1, 10), hi = std::strtol(b.c_str(), &e2, 10);
      require(!a.empty() && !b.empty() && *e1 == '\0' && *e2 == '\0' && lo <= hi && hi - lo < 100000,
              "SLURM node list '" + list + "' has a malformed range '" + r + "'");
      for (long n = lo; n <= hi; ++n) {
        std::string num = std::to_string(n);
        if (num.size() < a.size()) num = std::string(a.size() - num.size(), '0') + num;
        out.push_back(prefix + num + suffix);
      }
    }
  }
  return out;
}

DistEnv detect_env(const GetEnv& get_fn) {
  Vars v{get_fn ? get_fn : GetEnv([](const char* n) -> const char* { return std::getenv(n); })};
  DistEnv e;
  e.store_prefix = v.str("DTRAIN_STORE_PREFIX");
  e.store_dir = v.str("DTRAIN_STORE_DIR");
  e.socket_ifname = v.str("DTRAIN_SOCKET_IFNAME", v.str("GLOO_SOCKET_IFNAME"));
  e.restart_count = v.rank("DTRAIN_RESTART_COUNT", 0);
  e.elastic_nodes = v.str("DTRAIN_ELASTIC");
  e.elastic = !e.elastic_nodes.empty();
  if (e.elastic) {
    const size_t colon = e.elastic_nodes.find(':');
    const auto lo = parse_whole(e.elastic_nodes.substr(0, colon), 1, kMaxWorld);
    const auto hi = colon == std::string::npos ? lo : parse_whole(e.elastic_nodes.substr(colon + 1), 1, kMaxWorld);
    require(colon != std::string::npos && lo && hi && *lo <= *hi,
            "environment variable DTRAIN_ELASTIC='" + e.elastic_nodes +
                "' is not MIN:MAX (node counts, 1 <= MIN <= MAX, e.g. 2:4): fix the launch line or unset it");
    e.elastic_min = int(*lo);
    e.elastic_max = int(*hi);
  }
  e.master_port = v.num("MASTER_PORT", 29500, 1, 65535);  // a port to connect to: 0 ("any") is none
  e.mpi_launched = v.has("OMPI_COMM_WORLD_SIZE") || v.has("PMIX_RANK");
  if (v.has("RANK") || v.has("WORLD_SIZE")) {
    require(v.has("RANK") && v.has("WORLD_SIZE"),
            "RANK and WORLD_SIZE must be set together (launch with dtrun, or set both)");
    e.launcher = v.has("DTRAIN_AGENT") ? "dtrun" : "torchrun-style variables";
    e.agent_store = v.has("DTRAIN_AGENT");
    e.rank = v.rank("RANK", 0);
    e.world_size = v.count("WORLD_SIZE", 1);
    e.local_rank = v.rank("LOCAL_RANK", e.rank);
    e.local_world_size = v.count("LOCAL_WORLD_SIZE", e.world_size);
    e.node_rank = v.rank("GROUP_RANK", v.rank("NODE_RANK", 0));
    e.master_addr = v.str("MASTER_ADDR", "127.0.0.1");
    e.token = v.str("DTRAIN_JOB_TOKEN", "dtrain:" + e.master_addr + ":" + std::to_string(e.master_port));
  } else if (v.has("OMPI_COMM_WORLD_SIZE")) {
    e.launcher = "OpenMPI";
    e.rank = v.rank("OMPI_COMM_WORLD_RANK", 0);
    e.world_size = v.count("OMPI_COMM_WORLD_SIZE", 1);
    e.local_rank = v.rank("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    e.local_world_size = v.count("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
    e.node_rank = v.rank("OMPI_COMM_WORLD_NODE_RANK", 0);
    const bool one_node = e.local_world_size == e.world_size;
    require(v.has("MASTER_ADDR") || one_node,
            "mpirun across nodes: set MASTER_ADDR to the first node's address (mpirun -x MASTER_ADDR=HOST ...)");
    e.master_addr = v.str("MASTER_ADDR", "127.0.0.1");
    e.token = v.str("DTRAIN_JOB_TOKEN", "dtrain-ompi:" + v.str("PMIX_NAMESPACE", v.str("OMPI_MCA_ess_base_jobid")));
  } else if (v.has("SLURM_STEP_ID") && v.has("SLURM_PROCID") && (v.has("SLURM_STEP_NUM_TASKS") || v.has("SLURM_NTASKS"))) {
    e.launcher = "SLURM";
    e.rank = v.rank("SLURM_PROCID", 0);
    e.world_size = v.count("SLURM_STEP_NUM_TASKS", v.count("SLURM_NTASKS", 1));
    e.local_rank = v.rank("SLURM_LOCALID", 0);
    e.node_rank = v.rank("SLURM_NODEID", 0);
    // tasks on this node: SLURM_STEP_TASKS_PER_NODE looks like "4(x2),3"; take the node's share
    e.local_world_size = e.world_size;
    if (const int nodes = v.count("SLURM_STEP_NUM_NODES", 1); nodes > 1) {
      e.local_world_size = std::max(1, e.world_size / nodes);
    }
    if (v.has("MASTER_ADDR")) {
      e.master_addr = v.str("MASTER_ADDR");
    } else {
      const std::string list = v.str("SLURM_STEP_NODELIST", v.str("SLURM_JOB_NODELIST"));
      auto hosts = expand_slurm_nodelist(list);
      require(!hosts.empty(), "SLURM gave no node list (SLURM_STEP_NODELIST): set MASTER_ADDR");
      e.master_addr = hosts.size() == 1 ? "127.0.0.1" : hosts[0];
    }
    const int64_t job = v.num64("SLURM_JOB_ID", 0, 0, int64_t(UINT32_MAX));  // SLURM's job ids are 32-bit
    if (!v.has("MASTER_PORT")) e.master_port = 29500 + int(job % 1000);
    e.token = v.str("DTRAIN_JOB_TOKEN", "dtrain-slurm:" + std::to_string(job) + "." + v.str("SLURM_STEP_ID"));
  }
  require(e.rank < e.world_size, "rank " + std::to_string(e.rank) + " is not below the world size " +
                                     std::to_string(e.world_size) + " (" + e.launcher + "): fix the launch line");
  require(e.local_rank < e.local_world_size || e.launcher == "SLURM",
          "local rank " + std::to_string(e.local_rank) + " is not below the local world size " +
              std::to_string(e.local_world_size) + ": fix the launch line");
  return e;
}

std::string DistEnv::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (local " +
         std::to_string(local_rank) + " of " + std::to_string(local_world_size) + ", node " +
         std::to_string(node_rank) + ") via " + launcher;
}

}  // namespace dtrain
