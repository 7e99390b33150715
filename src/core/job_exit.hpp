// Exit statuses a dtrain worker and its launcher agree on.
#pragma once

namespace dtrain {

// The workers of an elastic job stopped after a checkpoint because dtrun has nodes waiting to join:
// not a failure; dtrun restarts them with the new nodes (EX_TEMPFAIL's number).
constexpr int kExitForNewNodes = 75;

// A worker under dtrun stopped on an error that follows from its configuration (a bad value, a mesh
// the world cannot hold, ranks that disagree): it would recur on every restart, so dtrun stops the
// job at once instead of burning its restarts (EX_CONFIG's number). Outside dtrun such errors exit 2.
constexpr int kExitConfigError = 78;

// Every rank stopped before the job's time limit or at preemption (SIGUSR1, SIGTERM,
// train.stop_before) after writing a resume checkpoint: not a failure, and not to be restarted in
// this allocation; the batch script requeues the job, which goes on with `--resume auto`.
constexpr int kExitSavedForRequeue = 79;

}  // namespace dtrain
