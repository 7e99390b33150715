// The Trainer: epochs of steps over the prepared data, evaluation, checkpoints, resume, metrics
// (course line per epoch, metrics.jsonl, TensorBoard, summary.json), and the stop before a job ends.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "comm/world.hpp"
#include "train/checkpoint/checkpoint.hpp"
#include "train/evaluate.hpp"
#include "train/config.hpp"
#include "train/threads.hpp"

namespace dtrain {

// How a run ended: its last step done, or stopped before its job ended (a signal, train.stop_before)
// with a checkpoint to go on from.
enum class RunEnd { finished, stopped_to_requeue };

class Trainer {
 public:
  // Fresh run into run_dir, or, with resume, continue from run_dir's newest good checkpoint, or
  // from resume_checkpoint when given (a checkpoint folder of this or another run, any layout).
  // With several ranks in `world`, trains in parallel; only rank 0 prints and writes logs. Runs on
  // the OpenMP threads in effect (configure_threads).
  Trainer(RunConfig config, std::string run_dir, bool resume, World& world, const std::string& resume_checkpoint = "");
  ~Trainer();
  RunEnd run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain
