// What dtrun gives each worker of a round: torchrun's variables and dtrain's own (the store, the job
// token, the restart, an elastic job's sizes, the log level), its threads and CPUs; the job token
// itself; and the debug line that shows a worker's start with the token hidden.
#pragma once
#include <string>
#include <vector>

#include "launch/options.hpp"
#include "launch/workers.hpp"

namespace dtrain {

// Where one round's workers on this node stand.
struct RoundPlace {
  int round = 0;            // the restart count (DTRAIN_RESTART_COUNT)
  int node = 0;             // this node's index among the members (GROUP_RANK)
  int nodes = 1;            // members
  int first_rank = 0;       // the global rank of this node's local rank 0
  int world = 1;            // ranks in all
  std::string change;       // the membership change that started the round ("" none)
  std::string store_host;   // MASTER_ADDR (the address, resolved once)
  int store_port = 0;       // MASTER_PORT
  std::string token;        // DTRAIN_JOB_TOKEN
  std::string store_prefix; // DTRAIN_STORE_PREFIX: the round's keys in the store
};

// The job token the workers share (DTRAIN_JOB_TOKEN): the variable's; a random one on one node; else
// one derived from --rdzv-id and the endpoint (derived: true; the nodes must agree without talking).
std::string job_token(const LaunchOptions& o, bool* derived);

std::vector<WorkerSpec> worker_specs(const LaunchOptions& o, const RoundPlace& place);

// "rank 1 (local rank 1) starts: DTRAIN_JOB_TOKEN=<secret> … RANK=1 … PROGRAM ARGS" (what dtrun sets).
std::string describe_worker_start(const WorkerSpec& spec, const std::vector<std::string>& command);

}  // namespace dtrain
