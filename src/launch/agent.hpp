// dtrun's agent on one node: meets the other nodes' agents in the store, starts this node's
// workers with their environment, forwards their output, stops them all when one fails, and
// restarts the group (resuming from the latest checkpoint) up to --max-restarts times.
#pragma once
#include "launch/options.hpp"

namespace dtrain {

// Runs the job to its end; returns dtrun's exit status (0: every worker on every node succeeded;
// kExitSavedForRequeue: they saved a checkpoint on SIGUSR1/SIGTERM, or none ran yet; 1: a failure;
// 128 + the signal: SIGINT or SIGHUP stopped them).
int run_agent(const LaunchOptions& options);

}  // namespace dtrain
