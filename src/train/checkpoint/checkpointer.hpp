// A run's checkpoints as the loop sees them: when one is due (train.checkpoint_every), saving one (the
// loop's position made global), model_best and model_final, the background save's landing, each in
// the run log; and an elastic job's stop after a checkpoint when nodes wait to join.
#pragma once
#include <functional>
#include <cstdint>
#include <string>

#include "train/checkpoint/run_saver.hpp"
#include "train/elastic.hpp"
#include "train/global_batch.hpp"
#include "train/run_log.hpp"

namespace dtrain {

class Checkpointer {
 public:
  // Where the loop's position stands globally: dp ranks, split into batches as `split`, of an epoch
  // of epoch_samples samples.
  struct Shape {
    int dp = 1;
    BatchSplit split;
    int64_t epoch_samples = 0;
    // A mix's sources and what each gave through (epoch, samples of it consumed); none: no mix.
    std::function<Json(int64_t epoch, int64_t samples_in_epoch)> data_sources;
  };
  Checkpointer(RunSaver& saver, World& world, RunLog& log, NewNodesWatch& new_nodes, int64_t every, Shape shape)
      : saver_(saver), world_(world), log_(log), new_nodes_(new_nodes), every_(every), shape_(shape) {}

  // Whether step `step` saves a checkpoint. A step that ends the epoch's loop (loop_ends) is saved by
  // the epoch's end instead (once, with the epoch closed).
  bool due(int64_t step, bool loop_ends) const { return every_ > 0 && step % every_ == 0 && !loop_ends; }
  // A resume checkpoint of `state`, logged. Every rank takes part. In an elastic job with nodes
  // waiting to join, every rank then stops (StopForNewNodes) unless the run ends here anyway (last).
  void save(const TrainerState& state, bool last = false);
  // The checkpoint a run stops on before its job ends: written whole before it returns (never in the
  // background), after any save in flight has landed. Returns the seconds it took. Collective.
  double save_now(const TrainerState& state);
  // Weights only, RUN/NAME (model_best, model_final), after any save in flight. Collective.
  void weights(const std::string& name, const TrainerState& state);
  // Waits for the background save in flight (if any) and logs how long its writing took.
  void finish_background();
  // Whether this run dir's newest checkpoint, written or resumed from by this run, is of `step`.
  bool saved_at(int64_t step) const { return last_step_ == step; }
  void resumed_at(int64_t step) { last_step_ = step; }

 private:
  void write(const TrainerState& state, bool may_background);  // the checkpoint, logged
  RunSaver& saver_;
  World& world_;
  RunLog& log_;
  NewNodesWatch& new_nodes_;
  int64_t every_;
  Shape shape_;
  int64_t last_step_ = -1;
};

}  // namespace dtrain
