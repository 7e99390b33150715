// One optimizer step's math, the one the trainer runs and bench_train times: forward and backward
// over each micro-batch, the gradients' last reductions, the clip and the update, then the step's
// loss. What a step is made of comes in a StepSpec; the batches one at a time from the caller.
#pragma once
#include <cstdint>
#include <functional>

#include "data/batch.hpp"
#include "parallel/plan.hpp"

namespace dtrain {

struct StepSpec {
  StepContext base;         // T, dropout, seed, step, precision (the rest: ParallelModel::training_context)
  int64_t step = 0;         // optimizer steps before this one (the learning rate's place)
  int64_t total_steps = 0;  // the run's (the schedule's length)
  int64_t micro = 1;        // micro-batches (loader batches) it takes
  int64_t samples = 0;      // its samples over all ranks
  bool uneven = false;      // micro-batches of other sizes (an epoch's last step)
  int64_t micro_batch = 1;  // samples per rank of a full micro-batch
  double grad_clip = 0.0;   // optim.grad_clip; 0: none
};

struct StepResult {
  double loss_sum = 0.0;  // micro × the mean loss over the step's rows (all ranks' once averaged)
  double norm = 0.0;      // the gradient's global norm (with a clip)
  float lr = 0.0f;
};

// The step's batches, one per call, in order (a filler batch counts for nothing).
using NextBatch = std::function<Batch&()>;

// Runs the step on every rank of the model's mesh (collective). Error when the loss is not finite.
StepResult train_step(ParallelModel& model, const StepSpec& spec, const NextBatch& next_batch);

}  // namespace dtrain
