// A scaling study's results (`dtrain scale`): a point per worker count read from its run's
// summary.json, written as scaling.csv and as a self-contained scaling.html (speedup, efficiency,
// the phases of a step per point).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/json.hpp"

namespace dtrain {

struct ScalingPoint {
  int workers = 1;
  int64_t per_rank_batch = 0, global_batch = 0;
  double tokens_per_s = 0.0;  // summary.json's steady_tokens_per_s
  double step_seconds = 0.0;  // step_time.mean_s
  std::vector<std::pair<std::string, double>> phases;  // step_time.phases[*].mean_s, in the summary's order
  std::string run_dir;
};

// The point's figures from its run's summary.json (read from `source`). Error naming the file and
// the missing key when the run did not record them (a dtrain from before step timing).
ScalingPoint scaling_point(int workers, int64_t per_rank_batch, int64_t global_batch, const Json& summary,
                           const std::string& source);

struct ScalingStudy {
  std::string mode;  // "strong" or "weak"
  std::vector<std::pair<std::string, std::string>> settings;  // what was run (config, steps, …), for the page
  std::vector<ScalingPoint> points;                           // by worker count, ascending
};

// Each point's speedup: its tokens/s over the smallest count's, times that count (1 when it is 1),
// so the smallest count counts as perfectly efficient. Efficiency = speedup / workers.
std::vector<double> scaling_speedups(const ScalingStudy& study);

// workers,per_rank_batch,global_batch,tokens_per_s,step_seconds,speedup,efficiency, then <phase>_s per
// phase (docs/watching.md's order, others after); a line per point.
std::string scaling_csv(const ScalingStudy& study);
// The page: the points as a table, speedup against workers with the ideal line, efficiency with the
// 100% line, throughput, and a stacked bar of the step's phases per point.
std::string scaling_html(const ScalingStudy& study);

}  // namespace dtrain
