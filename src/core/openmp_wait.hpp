// OpenMP threads that sleep when a parallel region ends instead of spinning: libgomp's threads spin
// for a while by default, taking the cores that other ranks on the machine (or other jobs) need.
#pragma once
#include <string>

namespace dtrain {

// libgomp reads its wait policy once, before main. When the environment sets none (neither
// OMP_WAIT_POLICY nor GOMP_SPINCOUNT), this re-executes the program once with
// OMP_WAIT_POLICY=PASSIVE; it returns when a policy is set (by the user or by the re-execution) or
// the re-execution failed. Call it first thing in main, before any thread starts.
void ensure_passive_openmp_wait(char** argv);

// What the environment set: "passive", "active", "spins up to N times then sleeps", or "libgomp's
// default (spins, then sleeps)".
std::string openmp_wait_policy();

}  // namespace dtrain
