// A training job as the planner (`dtrain plan`) sees it: the run's config with its model complete
// (the vocabulary known), the world it would run on and, for one layout, the mesh and batch split.
#pragma once
#include <string>

#include "comm/mesh.hpp"
#include "nn/model_kind.hpp"
#include "train/config.hpp"
#include "train/global_batch.hpp"

namespace dtrain {

struct PlanJob {
  RunConfig cfg;  // parallel.* as given; a layout is set on a copy (with_layout)
  const ModelKind* kind = nullptr;
  Precision precision = Precision::f32;
  double flops_per_sample = 0.0;  // training FLOPs of one sample through the whole model
};

// The job of config `cfg`: its model checked, the vocabulary taken from model.vocab_size or, where
// that is not given, from the data (data.*). Error naming the fix when neither says.
PlanJob plan_job(RunConfig cfg);

// One layout of the job: the mesh, and parallel.* / train.* as a run on it would have them.
struct Layout {
  MeshShape shape;
  std::string schedule = "1f1b";  // pp > 1
  int microbatches = 0;           // pp > 1; 0: pp
  int virtual_stages = 1;
  Recompute recompute = Recompute::none;
  bool tp_sequence = false;
  std::string describe() const;  // "dp_shard 4 × tp 2, sp, 1f1b m8, recompute selective"
  std::string mesh_argument() const;  // as `dtrain plan --mesh` takes it: "pp=2,dp_shard=4,tp=2,sp=1,…"
  std::string sets() const;  // as `dtrain train` takes it: "--set parallel.pp=2 --set parallel.dp_shard=4 …"
};

// The config a run of `job` on `layout` reads (parallel.* and train.recompute set from it).
RunConfig with_layout(const PlanJob& job, const Layout& layout);
// The layout the config asks for on `world` ranks (parallel.*; -1 sizes filled in).
Layout layout_of_config(const RunConfig& cfg, int world);
// The batch split of a run of `cfg` on `shape` (train.global_batch / batch_size / grad_accum).
BatchSplit batch_split_of(const RunConfig& cfg, const MeshShape& shape);

}  // namespace dtrain
