// How many OpenMP threads a command runs on: train.threads (or --threads), else OMP_NUM_THREADS,
// else this rank's share of the CPUs it may use (core/cpu_share.hpp); and the line that says so.
#pragma once
#include <cstdint>
#include <string>

#include "comm/world.hpp"

namespace dtrain {

// Sets the OpenMP thread count and returns it: `threads` > 0 as given; 0: OMP_NUM_THREADS when set,
// else the CPUs of the affinity mask and cgroup quota divided by the ranks on this node (from the
// launcher's variables). Error (naming `setting`) for more threads than the CPUs this process may use.
int configure_threads(int64_t threads, const std::string& setting = "train.threads");

// Where configure_threads' number came from: "train.threads", "OMP_NUM_THREADS" or the share's
// reasons ("2 CPUs in the affinity mask, shared by 2 local ranks").
const std::string& thread_source();

// Collective over the world: every rank's thread count and CPUs, as the lines rank 0 prints:
// "threads: 1 per rank (OMP_NUM_THREADS); OpenMP waits passively" and the CPUs per host and rank.
std::string describe_threads(World& world);

}  // namespace dtrain
