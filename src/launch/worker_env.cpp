// The workers' environment (see worker_env.hpp).
#include "launch/worker_env.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/cpu_share.hpp"
#include "core/error.hpp"
#include "core/log_level.hpp"
#include "core/shell_word.hpp"

namespace dtrain {

namespace {

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

// The variables every worker of the round gets, and its own ranks.
std::map<std::string, std::string> round_variables(const LaunchOptions& o, const RoundPlace& p, int rank, int local) {
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(local)},
          {"WORLD_SIZE", std::to_string(p.world)},
          {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
          {"GROUP_RANK", std::to_string(p.node)},
          {"ROLE_NAME", o.role},
          {"ROLE_RANK", std::to_string(rank)},
          {"ROLE_WORLD_SIZE", std::to_string(p.world)},
          {"MASTER_ADDR", p.store_host},
          {"MASTER_PORT", std::to_string(p.store_port)},
          {"DTRAIN_AGENT", "1"},
          {"DTRAIN_JOB_TOKEN", p.token},
          {"DTRAIN_STORE_PREFIX", p.store_prefix},
          {"DTRAIN_RESTART_COUNT", std::to_string(p.round)},
          {"TORCHELASTIC_RESTART_COUNT", std::to_string(p.round)},
          {"DTRAIN_NODES", std::to_string(p.nodes)},
          {"DTRAIN_LOG_LEVEL", log_level_name(o.log_level)}};
}

}  // namespace

std::string job_token(const LaunchOptions& o, bool* derived) {
  const char* env_token = std::getenv("DTRAIN_JOB_TOKEN");
  *derived = false;
  if (env_token && *env_token) return env_token;
  if (o.standalone || o.nnodes == 1) return random_token();
  *derived = true;
  return "dtrun:" + o.rdzv_id + "@" + o.rdzv_host + ":" + std::to_string(o.rdzv_port);
}

std::vector<WorkerSpec> worker_specs(const LaunchOptions& o, const RoundPlace& p) {
  const CpuFacts cpus = read_cpu_facts();
  const CpuShare share = share_of(cpus, o.nproc_per_node, /*shared=*/true);  // its workers share dtrun's mask
  std::vector<WorkerSpec> out;
  for (int l = 0; l < o.nproc_per_node; ++l) {
    WorkerSpec s;
    s.rank = p.first_rank + l;
    s.local_rank = l;
    s.env = round_variables(o, p, s.rank, l);
    if (o.elastic()) s.env["DTRAIN_ELASTIC"] = std::to_string(o.min_nodes) + ":" + std::to_string(o.nnodes);
    if (!p.change.empty()) s.env["DTRAIN_MEMBERSHIP"] = p.change;
    const char* have = std::getenv("OMP_NUM_THREADS");
    if (o.bind == "cores") s.cpus = cpus_of_worker(cpus.mask, l, o.nproc_per_node);
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

std::string describe_worker_start(const WorkerSpec& spec, const std::vector<std::string>& command) {
  std::string s = "rank " + std::to_string(spec.rank) + " (local rank " + std::to_string(spec.local_rank) + ") starts:";
  for (const auto& [name, value] : spec.env)
    s += " " + name + "=" + (name == "DTRAIN_JOB_TOKEN" ? "<secret>" : shell_word(value));
  if (!spec.cpus.empty()) s += " (CPUs " + format_cpu_list(spec.cpus) + ")";
  for (const std::string& arg : command) s += " " + shell_word(arg);
  return s;
}

}  // namespace dtrain
