// The planner's search: the layouts of a world that a job can take (meshes, pipeline schedules and
// micro-batches, sequence parallel, recompute), each built rank by rank (build_rank) for its memory and
// timed (step_time), ranked by step time among those that fit.
#pragma once
#include <string>
#include <vector>

#include "train/plan/step_time.hpp"

namespace dtrain {

struct PlannedLayout {
  Layout layout;
  int64_t global_batch = 0;
  BatchSplit split;
  RankBuild worst;           // the rank that needs the most memory
  std::vector<std::pair<int, MemoryAccount>> ranks;  // every rank built (those whose parts differ)
  double need_bytes = 0.0;   // its planned parts and the process's own (Hardware::process_gib)
  bool fits = false;
  StepTime time;
  double tokens_per_s = 0.0, mfu = 0.0;  // over the world; MFU against the profile's peak
  std::string refused;       // why the model cannot take it (its ConfigError), "" when built
  // Why it lost to the best ("needs 92 GiB of 79", "bubble 31%", "tensor-parallel communication …")
  std::string why_not(const PlannedLayout& best) const;
};

// One layout planned: built rank by rank (the distinct ranks), timed.
PlannedLayout plan_layout(const PlanJob& job, const Layout& layout, int64_t global_batch, const Hardware& h);

struct SearchResult {
  std::vector<PlannedLayout> layouts;  // fitting first, fastest first; then those that do not fit, least memory first
  int64_t global_batch = 0;
  int considered = 0;  // layouts enumerated (after pruning)
  int refused = 0;     // of them, what the model cannot take
};

// The layouts of `world` ranks for `job` (its global batch: train.global_batch, or what its config's
// own layout takes on that world). Pruned: tensor and context parallel within a node, powers of two,
// recompute tried only where less does not fit, a few micro-batch counts per pipeline.
SearchResult search_layouts(const PlanJob& job, int world, const Hardware& h);

// The global batch a job trains on `world` ranks: train.global_batch, else train.batch_size ×
// train.grad_accum × the data-parallel ranks of the layout `given` (null: its config's own there).
int64_t job_global_batch(const PlanJob& job, int world, const Layout* given = nullptr);

}  // namespace dtrain
