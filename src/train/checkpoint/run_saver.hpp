// Saving a run: resume checkpoints under RUN/checkpoints (their format, name and pruning; one at a
// time, in the background when asked) and weights-only folders (model_best, model_final), and how
// the ranks share the writing. The trainer says when to save; this says what and how.
#pragma once
#include <memory>
#include <string>

#include "comm/world.hpp"
#include "data/source.hpp"
#include "parallel/plan.hpp"
#include "train/checkpoint/checkpoint_writer.hpp"
#include "train/config.hpp"

namespace dtrain {

class RunSaver {
 public:
  // kept: the data's file checkpoints keep beside the model (DataSource::kept_file).
  RunSaver(World& world, DeviceMesh& mesh, ParallelModel& par, const RunConfig& cfg, std::string run_dir,
           DataSource::KeptFile kept);

  struct Checkpoint {
    std::string dir;
    bool sharded = false, async = false;
    SaveReport report;
  };
  // A resume checkpoint of `state` (RUN/checkpoints/step_N, N its step: sharded or full, see
  // train.checkpoint_format; written in the background with train.checkpoint_async), the older
  // ones beyond train.keep_checkpoints pruned once it is in place; may_background false: written
  // before it returns even so (in the format the setting chooses). Collective.
  Checkpoint checkpoint(const TrainerState& state, bool may_background = true);
  // Weights only, RUN/NAME (model_best, model_final): the full format (one model.safetensors that
  // PyTorch, eval and generate read), sharded under pipeline parallelism. Collective.
  void weights(const std::string& name, const TrainerState& state);
  // Waits for the background save in flight: its step (-1: none was in flight) and how long its
  // writing took.
  std::pair<int64_t, double> finish_background();
  // The most host memory the saves held at once beside the model (CheckpointWriter::buffer_bytes).
  size_t buffer_bytes() const { return writer_.buffer_bytes(); }

 private:
  SaveReport save(const std::string& dir, bool with_optimizer, const TrainerState& state, bool sharded, bool async,
                  std::function<void()> after_commit);

  World& world_;
  DeviceMesh& mesh_;
  ParallelModel& par_;
  const RunConfig& cfg_;
  std::string run_dir_;
  DataSource::KeptFile kept_;
  CheckpointWriter writer_;
  int64_t background_step_ = -1;  // the background save in flight, if any
};

}  // namespace dtrain
