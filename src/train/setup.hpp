// A training run's setup: the data (the model fitted to it, the splits), the device, the mesh, the
// model with its parallel plan, the start point (a checkpoint resumed, train.init_from's weights, or
// fresh) and the run dir (its history, config.json, the logs), built in that order on every rank.
// The trainer runs the parts it returns.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "comm/mesh.hpp"
#include "data/sampler.hpp"
#include "data/source.hpp"
#include "parallel/plan.hpp"
#include "train/checkpoint/checkpoint.hpp"
#include "train/checkpoint/checkpointer.hpp"
#include "train/checkpoint/run_saver.hpp"
#include "train/elastic.hpp"
#include "train/evaluator.hpp"
#include "train/global_batch.hpp"
#include "train/report/job_watch.hpp"
#include "train/report/run_dir.hpp"
#include "train/report/run_report.hpp"
#include "train/run_log.hpp"

namespace dtrain {

// The model of the run's config does not fit in the memory of this rank's device at its layout
// (TrainingParts::build_model): the message names the batch and the fix; `dtrain train` adds the
// planner's best layout that fits.
class ModelDoesNotFit : public Error {
 public:
  ModelDoesNotFit(const std::string& what, std::string device, size_t device_bytes)
      : Error(what), device(std::move(device)), device_bytes(device_bytes) {}
  std::string device;   // the rank's device, as it describes itself ("cuda:0 (NVIDIA H100 …)")
  size_t device_bytes;  // its memory (a GPU's); 0: the host's, asked of the system
};

struct TrainingParts {
  // Collective. resume: go on from run_dir's newest good checkpoint (or `from`, a checkpoint folder
  // of this or another run); dtrun's restarts resume too. Errors of the config, the data, the layout
  // and the checkpoint come here, before any step, alike on every rank.
  TrainingParts(RunConfig config, std::string run_dir, bool resume, const std::string& from, World& world);
  ~TrainingParts();

  const int64_t start_rss;  // the process's resident memory before the run (MemoryAccount::at_start)
  RunConfig cfg;
  const std::string run_dir;
  World& world;
  const bool root;                   // rank 0: the one that prints and writes
  const ModelKind& kind;             // of cfg.model
  std::unique_ptr<DataSource> data;  // data.dir, opened for the model's input
  std::unique_ptr<Dataset> train_set, valid_set, test_set;
  std::vector<std::unique_ptr<Dataset>> valid_by_source;  // a mix's validation, source by source
  std::shared_ptr<ComputeDevice> dev;
  Precision precision = Precision::f32;
  TrainerState state;                // where the run stands (resumed: where its checkpoint stood)
  std::unique_ptr<RunDirLock> lock;  // rank 0's, for the run's life
  std::unique_ptr<JobWatch> watch;   // phases, the trace, resources
  std::unique_ptr<DeviceMesh> mesh;
  std::unique_ptr<ParallelModel> parallel;  // the parallel plan applied on the mesh
  int dp = 1, dp_rank = 0;                  // data-parallel ranks, and this one's place among them
  // Samples per rank and micro-step, and micro-steps per optimizer step: train.batch_size and
  // train.grad_accum as given, or train.global_batch's split over the dp ranks (cfg keeps the
  // user's values, so config.json lets a resume at another size split again).
  BatchSplit batch_split;
  int64_t epoch_samples = 0;  // training samples per epoch, all ranks
  int64_t rank_samples = 0;   // of this data-parallel rank (unpadded)
  NewNodesWatch new_nodes;    // an elastic job's nodes waiting to join
  std::unique_ptr<RunLog> log;
  std::unique_ptr<RunSaver> saver;
  std::unique_ptr<Checkpointer> checkpoints;
  std::unique_ptr<Evaluator> evaluator;
  LoadReport load_report;  // of the checkpoint resumed from

  // The training samples' order: the epoch's seeded permutation dealt out to the data-parallel ranks
  // in turn (rank r takes positions r, r + dp, …), unpadded: each sample once per epoch at any size.
  DistributedSampler train_sampler() const;
  // Loader batches per epoch, alike on every rank: global batch b holds the permutation's positions
  // [b·B·dp, (b+1)·B·dp), so the epoch's last may be short, and some ranks then hold no sample of it.
  int64_t global_batches() const;
  // The samples of the epoch's loader batches [first, first + count) over all ranks, and whether
  // one of them is short (the epoch's last may be).
  struct BatchSamples {
    int64_t samples = 0;
    bool uneven = false;
  };
  BatchSamples samples_of_batches(int64_t first, int64_t count) const;
  // What the run is made of, for its report.
  RunParts report_parts();

 private:
  void open_data();
  std::vector<Evaluator::Part> valid_parts() const;  // valid_by_source, named
  // A mix's positions for the checkpoints (what each source gave so far); empty without a mix.
  std::function<Json(int64_t epoch, int64_t samples_in_epoch)> mix_positions() const;
  MeshShape mesh_shape_of_config();
  MeshShape mesh_shape(std::string& note) const;
  World::BackendFactory backend_factory();
  void build_model();
  void make_log_and_savers();
  bool start_from(bool& resume, const std::string& from);
  void open_run_dir(bool continues, bool resumed);
};

}  // namespace dtrain
