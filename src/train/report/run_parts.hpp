// What a training run is made of, as its reports read it (references into the run's parts).
#pragma once
#include "comm/mesh.hpp"
#include "comm/world.hpp"
#include "data/source.hpp"
#include "parallel/plan.hpp"
#include "train/config.hpp"
#include "train/global_batch.hpp"

namespace dtrain {

struct RunParts {
  const RunConfig& cfg;
  const ModelKind& kind;
  const DataSource& data;
  const Dataset& train_set;
  World& world;
  DeviceMesh& mesh;
  ParallelModel& par;
  ComputeDevice& dev;
  Precision precision;
  int dp;            // data-parallel ranks
  BatchSplit batch;  // samples per rank and micro-step, micro-steps per step
};

}  // namespace dtrain
