// One rank of a layout built as a run builds it — its slice of its stages, its shards, optimizer state,
// activation slots, gather pools — on a device that only counts (CountingDevice) and a mesh whose
// groups move no data (DeviceMesh::stand_in): its memory, part by part, from the code that takes it
// in a run; then one training step of it run by the run's own step code, every kernel and collective
// timed on a StepClock.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/plan/job.hpp"
#include "train/plan/step_clock.hpp"
#include "train/report/memory_account.hpp"

namespace dtrain {

// What the time model needs of a built rank.
struct RankWork {
  std::vector<double> stage_flops;  // each of its pipeline stages' training FLOPs for one sample (its slice)
  int64_t passes = 1;               // passes per optimizer step (accumulation × micro-batches)
  int64_t hidden_floats = 0;        // a hidden state of one pass (the input unit's output; this rank's rows)
  StepClockTally step;              // one training step run on the counting device, timed (StepClock)
};

struct RankBuild {
  int rank = 0;
  MeshCoord coord;
  MemoryAccount memory;     // model state, gather buffers, activations (model_memory of the built parts)
  RankWork work;
};

// Builds rank `rank` of `layout` for `job` and runs one training step of it on the counting device,
// timed on `h` (RankWork::step). Error (a ConfigError) for a layout the model cannot take, as the
// run would say it.
RankBuild build_rank(const PlanJob& job, const Layout& layout, int rank, const Hardware& h);

// The ranks of `shape` whose parts differ (each pipeline stage; the first and last tensor-parallel
// slice, which may hold more of a vocabulary that does not divide): the planner builds these.
std::vector<int> distinct_ranks(const MeshShape& shape);

}  // namespace dtrain
