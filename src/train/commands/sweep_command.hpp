// `dtrain sweep` inside: the plan read from its command line (sweep_command.cpp) and the two ways of
// running it, the points one after another here or a SLURM job array (sweep_launchers.cpp).
#pragma once
#include <string>
#include <vector>

#include "train/commands/command_args.hpp"
#include "train/report/sweep_report.hpp"

namespace dtrain {

// What the command line asks for, checked, with the sweep's record (sweep.json) made from it.
struct SweepPlan {
  std::string out, launcher, sbatch_args;
  int nproc = 1;
  bool dry_run = false;
  SweepRecord record;
  std::string run_dir(const SweepPointRecord& p) const;  // out/NAME
};

// The plan, every point's config built and validated as `dtrain train` would, and the output folder
// checked (new, empty, or holding this same sweep): one Error line for anything wrong, before
// anything is written or started.
SweepPlan plan_sweep(const CommandArgs& args);

// The `dtrain train` arguments of a point (after the program's name): the config, its run dir with
// `--resume auto`, the sweep's --set's, then the point's values as --set's.
std::vector<std::string> point_train_args(const SweepPlan& plan, const SweepPointRecord& point,
                                          const std::string& run_dir);
// The programs that start a point: dtrain, under `dtrun --standalone` when --nproc is above 1.
std::vector<std::string> point_launcher(const SweepPlan& plan);

// --launcher local: each point in turn, a status line per point on stdout; the exit status of the
// sweep (Error when some point failed).
int run_sweep_locally(const SweepPlan& plan, const std::vector<std::string>& launcher);
// --launcher slurm: DIR/sweep.sbatch and DIR/points.txt written and submitted with sbatch.
int submit_sweep_array(const SweepPlan& plan, const std::vector<std::string>& launcher);

}  // namespace dtrain
