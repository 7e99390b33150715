// What a run's config asks of its parallel model, in one place for the run (TrainingParts) and the
// planner (`dtrain plan`), so that both build the same parts: the strategies' options and the model
// kind's units.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/model_kind.hpp"
#include "parallel/plan.hpp"
#include "train/config.hpp"

namespace dtrain {

// parallel.* and train.* as a ParallelPlan: `accum` micro-steps per optimizer step; `batch_rows`:
// the rows of the batches a training pass will see (PipelineOptions::batch_rows).
ParallelPlan parallel_plan_of(const RunConfig& cfg, Precision precision, int64_t accum,
                              std::vector<int64_t> batch_rows);

// The kind's units for the config's model on `device`, checked against the plan's recompute.
UnitFactory model_units_of(const ModelKind& kind, const ModelConfig& model, ComputeDevice& device, Recompute recompute);

}  // namespace dtrain
