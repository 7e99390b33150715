// Checkpoints: a folder with the weights (model.safetensors, loadable by PyTorch), the optimizer
// state, the trainer's position and the vocabulary. Written to a staging folder and swapped in
// atomically, so an existing checkpoint is never half-overwritten.
#pragma once
#include <limits>
#include <string>

#include "ckpt/safetensors.hpp"
#include "core/json.hpp"
#include "nn/transformer.hpp"
#include "optim/optimizer.hpp"
#include "train/run_dir.hpp"

namespace dtrain {

struct TrainerState {
  int64_t global_step = 0;      // optimizer steps taken
  int64_t epoch = 0;            // current epoch (0-based)
  int64_t batch_in_epoch = 0;   // batches of `epoch` already trained
  double epoch_loss_sum = 0.0;  // sum of per-batch mean losses in `epoch` so far
  double best_val = std::numeric_limits<double>::infinity();
  double train_seconds = 0.0;   // time spent in training steps (for tokens/s)
  int64_t train_tokens = 0;
  int64_t data_parallel = 0;    // ranks that trained it (0: not recorded)
  int64_t global_batch = 0;     // samples per optimizer step
  LogMarks logs;                // where metrics.jsonl and the events file stood
  Json to_json() const;
  static TrainerState from_json(const Json& j, const std::string& source);  // Error names source
};

// The model's parameters as safetensors views (names as in docs/model.md), in unit order.
std::vector<SafeTensorView> weight_views(TransformerLM& model);

// Writes dir (replacing any previous content atomically). optimizer and state may be null
// (weights-only export such as model_best).
void save_checkpoint(const std::string& dir, TransformerLM& model, Optimizer* optimizer,
                     const TrainerState* state, const Json& run_config, const std::string& vocab_path);

// The model config a checkpoint was written for (Error if dir is not a checkpoint).
ModelConfig checkpoint_model_config(const std::string& dir);

// Error unless the checkpoint in dir was written for `config` (names the first difference and the fix).
void require_same_model(const std::string& dir, const ModelConfig& config);
// Removes what killed writers of dir left beside it (dir.staging.PID, dir.old.PID, dir.deleting.PID).
// The run dir's lock makes this process its only writer.
void remove_leftovers_of(const std::string& dir);
// What every checkpoint holds besides weights: trainer.json (state and run config, when state is
// given) and vocab.txt, written into the staging folder.
void write_checkpoint_extras(const std::string& staged, const TrainerState* state, const Json& run_config,
                             const std::string& vocab_path);
// model.safetensors' metadata: the format and the model config.
std::map<std::string, std::string> weights_metadata(const ModelConfig& config);

// Loads weights (and optimizer and state when given). Error if the checkpoint was written for a
// different model, or is corrupt or truncated.
void load_checkpoint(const std::string& dir, TransformerLM& model, Optimizer* optimizer, TrainerState* state);

// The newest complete checkpoint under run_dir/checkpoints, or "" when there is none.
std::string latest_checkpoint(const std::string& run_dir);
// Removes all but the newest `keep` checkpoints under run_dir/checkpoints.
void prune_checkpoints(const std::string& run_dir, int64_t keep);

}  // namespace dtrain
