// train_step (see train_step.hpp): the math of one optimizer step, top to bottom.
#include "train/train_step.hpp"

#include <cmath>
#include <string>

namespace dtrain {

StepResult train_step(ParallelModel& model, const StepSpec& spec, const NextBatch& next_batch) {
  const int64_t T = spec.base.T, micro = spec.micro;  // rows of the loss per sample; micro-batches
  Optimizer& opt = model.optimizer();
  // forward and backward over each micro-batch, the gradients accumulating; each row of the loss
  // weighs dp / (samples · T), so the data-parallel mean is the one-process mean (training_context)
  model.zero_grad();
  double uneven_loss = 0.0;  // uneven: this rank's share of the step's mean, read per micro-batch
  int64_t own_rows = 0;      // this rank's samples ahead of the micro-batch
  for (int64_t m = 0; m < micro; ++m) {
    Batch& batch = next_batch();
    const StepContext ctx = model.training_context(spec.base, batch.samples, own_rows, spec.samples, batch.filler);
    model.forward_backward(batch.view(), ctx, m == micro - 1);
    if (spec.uneven) {  // the data-parallel mean adds the shares up; a filler batch's loss is left out
      const double sum = model.take_loss();
      if (!batch.filler) uneven_loss += sum * double(model.data_parallel() * micro) / double(spec.samples * T);
    }
    if (!batch.filler) own_rows += batch.samples;
  }
  // the gradients' last reductions, clipped to optim.grad_clip by their global norm, and the update
  // at the step's rate (under DDP each bucket's as soon as it is in)
  StepResult r;
  r.lr = opt.lr_at(spec.step, spec.total_steps);
  r.norm = model.finish_and_update(r.lr, spec.grad_clip);
  // the step's loss, read only now: nothing waits inside the step
  r.loss_sum = spec.uneven ? uneven_loss : uneven_loss + model.take_loss() / double(spec.micro_batch * T);
  require(std::isfinite(r.loss_sum), "training diverged at step " + std::to_string(spec.step) +
                                         " (loss is not finite): lower train.lr or set optim.grad_clip");
  return r;
}

}  // namespace dtrain
