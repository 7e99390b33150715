// Checkpointer (see checkpointer.hpp).
#include "train/checkpoint/checkpointer.hpp"

#include <algorithm>
#include <chrono>

#include "core/phase_clock.hpp"

namespace dtrain {

void Checkpointer::save(const TrainerState& state, bool last) {
  write(state, true);
  if (last || !new_nodes_.asked()) return;
  finish_background();                       // the checkpoint the job goes on from is whole on disk
  throw StopForNewNodes(state.global_step);  // dtrun restarts the job with the nodes that wait to join
}

double Checkpointer::save_now(const TrainerState& state) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!saved_at(state.global_step)) write(state, false);
  finish_background();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Checkpointer::write(const TrainerState& state, bool may_background) {
  PhaseScope phase(Phase::checkpoint);
  // The epoch's loss so far is saved averaged over the ranks: a resumed run, at any size, then
  // prints the epoch loss the uninterrupted run would have.
  TrainerState saved = state;
  const int dp = shape_.dp;
  saved.epoch_loss_sum = mean_over_data_parallel(world_, dp, state.epoch_loss_sum);
  saved.data_parallel = dp;
  saved.global_batch = shape_.split.global(dp);
  saved.samples_in_epoch = std::min(state.batch_in_epoch * shape_.split.micro_batch * dp, shape_.epoch_samples);
  if (shape_.data_sources) saved.data_sources = shape_.data_sources(saved.epoch, saved.samples_in_epoch);
  if (log_.is_open()) saved.logs = log_.marks();
  finish_background();  // one save at a time; the one in flight is logged as it lands
  const RunSaver::Checkpoint c = saver_.checkpoint(saved, may_background);
  last_step_ = state.global_step;
  log_.checkpoint(state.global_step, c.sharded, c.async, c.report.bytes, c.report.stall_seconds);
}

void Checkpointer::weights(const std::string& name, const TrainerState& state) {
  finish_background();
  saver_.weights(name, state);
}

void Checkpointer::finish_background() {
  const auto [step, seconds] = saver_.finish_background();
  if (step >= 0) log_.checkpoint_written(step, seconds);
}

}  // namespace dtrain
