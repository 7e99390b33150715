// Where a run goes on from: which checkpoints to try (the run dir's line of history, or a folder
// the user names), the newest good one of them past damaged ones, and where the loader then stands
// in the epoch. The trainer calls these; loading itself is checkpoint.hpp's.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "core/json.hpp"
#include "train/checkpoint/checkpoint.hpp"

namespace dtrain {

// Whether checkpoint folder `ck` (RUN/checkpoints/step_N) belongs to run dir `run_dir`.
bool in_run_dir(const std::string& ck, const std::string& run_dir);

// What `dtrain train --resume WHAT [--run-dir DIR]` continues: the run dir it goes on in, the config
// it runs with (read from `config_source`) and the checkpoint to start from ("" the run dir's newest).
// WHAT is a run dir (its config.json; continued in itself), a checkpoint folder (its trainer.json's
// config; continued in its run dir or in --run-dir), or, when dtrun restarted the workers
// (restarted) with `--resume RUN/checkpoints/step_N`, that run (step_N itself may have been pruned
// since) with the config its first attempt wrote. Error naming what WHAT is not, and the fix.
struct ResumeTarget {
  std::string run_dir, checkpoint, config_source;
  Json config;
};
ResumeTarget resume_target(const std::string& what, const std::string& run_dir, bool restarted);

// What `--resume auto` (train.resume = "auto") does with run dir `run_dir` for the run of `config`
// (resolved): go on with the run it holds (from its newest good checkpoint, or from the start if it
// has none yet), start one when it holds none, or nothing when its run is finished (summary.json).
// Error, naming the fix, for a run dir holding a run of another config (keys a rank or a requeue may
// set otherwise aside), and for a requeued job (requeues > 0: SLURM_RESTART_COUNT) whose run dir
// holds no run: it was removed, or the batch script's RUN_DIR changed.
enum class AutoResume { start, go_on, finished };
AutoResume auto_resume(const std::string& run_dir, const Json& config, int requeues);

// The checkpoints a run may go on from, newest first. resume: `dtrain train --resume`; restarted:
// dtrun restarted the workers; from: a checkpoint folder the user named ("" none). Error for a run
// dir that already holds a run (or another run) the call does not continue.
struct ResumePlan {
  std::vector<std::string> candidates;
  bool named = false;  // the one folder the user named: no fallback to an older one
};
ResumePlan plan_resume(const std::string& run_dir, bool resume, bool restarted, const std::string& from);

// Loads the newest good checkpoint of `plan` with `load` (every rank, collective over `all`): a
// checkpoint some rank finds damaged (CheckpointDamaged) is named by that rank and the next older
// one is tried; Error when none is left (or the named one is damaged). Returns the checkpoint
// loaded, "" when there are no candidates.
std::string load_newest_good(const ResumePlan& plan, const std::string& run_dir, ProcessGroup& all,
                             const std::function<void(const std::string&)>& load);

// This layout's loader position for a checkpoint's global one (samples of the epoch's permutation
// consumed): with the same global batch, a run resumed at any size goes on with the very samples
// the uninterrupted run would have seen next. note: why the trajectory will differ, or "".
struct LoaderPlace {
  int64_t batch_in_epoch = 0;
  std::string note;
};
LoaderPlace place_loader(const TrainerState& st, int64_t batch_size, int dp, int64_t epoch_samples, int64_t grad_accum);

}  // namespace dtrain
