// `dtrain scale`: the course's scaling study. Trains the same config for a few steps at each worker
// count (under dtrun, or srun inside a Slurm allocation), then writes scaling.csv and scaling.html.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace dtrain {

struct ScalingOptions {
  std::string config;             // the TOML config
  std::string nproc;              // worker counts, "1,2,4,8"
  std::string mode = "strong";    // strong: the global batch stays; weak: the per-rank batch stays
  int threads_per_rank = 1;
  int64_t steps = 20;
  std::vector<std::string> sets;  // key=value, after the study's own settings
  std::string launcher = "dtrun"; // dtrun or srun
  std::string out;                // DIR: DIR/nproc_N (run dirs), DIR/nproc_N.log, DIR/scaling.{csv,html}
};

// The worker counts of "1,2,4,8", ascending. Error naming the list and the fix when it is not
// distinct whole numbers from 1.
std::vector<int> parse_worker_counts(const std::string& text);

// Runs the study, a line per point on `out` as it goes. Everything a user can get wrong (options,
// config, a batch a worker count does not divide, a run dir already used, a missing dtrun or
// Slurm allocation) is an Error before the first point runs; a point that fails stops the study
// with an Error naming it and its log. scaling.csv and scaling.html are rewritten after each point.
void run_scaling_study(const ScalingOptions& options, std::FILE* out);

}  // namespace dtrain
