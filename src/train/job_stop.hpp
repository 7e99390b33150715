// Stopping a run before its job ends: SIGUSR1 (SLURM's warning before the time limit), SIGTERM
// (preemption, the limit itself) or train.stop_before (minutes before the job's end time) make every
// rank finish its step, agree in one collective, save and exit with kExitSavedForRequeue.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "comm/world.hpp"

namespace dtrain {

// Catches SIGUSR1 and SIGTERM from now on: they are recorded (a second one changes nothing), never
// fatal. Call before anything slow, so a signal during setup is kept for the first agreement.
void catch_stop_signals();
// Whether a stop signal was caught, and which ("SIGUSR1 (…) and SIGTERM (…)").
bool stop_signal_caught();
std::string stop_signals_caught();

// The job's end time in seconds since the epoch, as its scheduler says: DTRAIN_JOB_END_TIME (any
// scheduler), SLURM_JOB_END_TIME (SLURM 23.02 and later), else `squeue -h -j $SLURM_JOB_ID -o %e`.
// why_not: why there is none (not in a job, an unlimited job, squeue failed).
std::optional<int64_t> job_end_time(std::string* why_not);

class JobStop {
 public:
  // stop_before_minutes: train.stop_before (0: none); rank 0 asks for the job's end time and tells
  // the others (collective), and says when the run will stop.
  JobStop(World& world, double stop_before_minutes);
  ~JobStop();

  // Before a step: this rank's wish to stop (a signal, the deadline passed), sent to the others in
  // the background. agreed() after the step: whether any rank wished it (every rank alike).
  void start_step();
  bool agreed();
  // Before the first step: whether a stop was asked during setup (collective, blocking).
  bool asked_before_start();
  // Why the ranks stopped, for the line that says it ("SIGUSR1 (...)", "train.stop_before: ...").
  std::string reason() const;

 private:
  bool wish() const;

  World& world_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  double stop_before_minutes_ = 0.0;
  int64_t flag_ = 0;
  bool in_flight_ = false;
  WorkPtr work_;
};

}  // namespace dtrain
