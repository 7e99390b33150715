// The Trainer: epochs of steps over the prepared data, evaluation, checkpoints, resume, metrics
// (course line per epoch, metrics.jsonl, TensorBoard, summary.json).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "data/dataset.hpp"
#include "data/token_file.hpp"
#include "comm/world.hpp"
#include "train/checkpoint.hpp"
#include "train/config.hpp"

namespace dtrain {

struct EvalResult {
  double loss = 0.0;  // token-weighted mean cross-entropy
  int64_t tokens = 0;
};

// Mean loss of `model` over a dataset's first max_windows windows (0 = all; no dropout), in
// batches of batch_size per rank, shared out over the group's ranks (each window scored once).
// hooks (FSDP's) run around every unit; then every rank of the group runs the same number of passes.
EvalResult evaluate(Model& model, const WindowDataset& data, int64_t batch_size, int64_t max_windows,
                    Precision precision, ProcessGroup* group = nullptr, UnitHooks* hooks = nullptr);
// The same with any pass: loss_of(batch, ctx) is a batch's summed loss (a pipeline's, through every
// stage); lockstep: every rank of the group must run the same passes.
using PassLoss = std::function<double(const BatchView& batch, const StepContext& ctx)>;
EvalResult evaluate(const PassLoss& loss_of, bool lockstep, const WindowDataset& data, int64_t batch_size,
                    int64_t max_windows, Precision precision, ProcessGroup* group = nullptr);

// Sets the OpenMP thread count (0 = all cores, or OMP_NUM_THREADS) and returns what is in effect;
// Error (naming `setting`) for more threads than the CPUs this process may use.
int configure_threads(int64_t threads, const std::string& setting = "train.threads");

class Trainer {
 public:
  // Fresh run into run_dir, or, with resume, continue from run_dir's newest good checkpoint, or
  // from resume_checkpoint when given (a checkpoint folder of this or another run, any layout).
  // With several ranks in `world`, trains in parallel; only rank 0 prints and writes logs. Runs on
  // the OpenMP threads in effect (configure_threads).
  Trainer(RunConfig config, std::string run_dir, bool resume, World& world, const std::string& resume_checkpoint = "");
  ~Trainer();
  void run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain
