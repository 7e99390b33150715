// Checkpoint folders: an index (index.json) of every tensor's chunks, the data files they point
// into, the trainer's state and position (trainer.json) and the vocabulary (docs/checkpoints.md).
// Loading intersects what a rank holds with the saved chunks, so any layout reads any other, and
// checks every chunk it reads against its checksum. Writing: checkpoint_writer.hpp.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include "ckpt/index.hpp"
#include "ckpt/safetensors.hpp"
#include "core/json.hpp"
#include "data/source.hpp"
#include "nn/model_kind.hpp"
#include "optim/optimizer.hpp"
#include "train/checkpoint/rank_state.hpp"
#include "train/report/run_dir.hpp"

namespace dtrain {

struct TrainerState {
  int64_t global_step = 0;      // optimizer steps taken
  int64_t epoch = 0;            // current epoch (0-based)
  int64_t batch_in_epoch = 0;   // this layout's loader batches of `epoch` already trained
  int64_t samples_in_epoch = 0; // the same position, global: samples of the epoch's permutation consumed
  double epoch_loss_sum = 0.0;  // sum of per-batch mean losses in `epoch` so far
  double best_val = std::numeric_limits<double>::infinity();
  double train_seconds = 0.0;   // time spent in training steps (for tokens/s)
  int64_t train_tokens = 0;
  int64_t data_parallel = 0;    // ranks that trained it (0: not recorded)
  int64_t global_batch = 0;     // samples per optimizer step
  LogMarks logs;                // where metrics.jsonl and the events file stood
  // A mix (data.mix): each source's dir, weight and samples drawn from it so far (informational: the
  // global position above fixes them); empty otherwise.
  Json data_sources = Json::array();
  Json to_json() const;
  static TrainerState from_json(const Json& j, const std::string& source);  // Error names source
};

// The model's parameters as safetensors views (names as in docs/model.md), in unit order; the
// model must own its parameters.
std::vector<SafeTensorView> weight_views(Model& model);

// model.safetensors' metadata: the format and the model config.
std::map<std::string, std::string> weights_metadata(const ModelConfig& config);

// The model config a checkpoint was written for (from its index; CheckpointDamaged without one).
ModelConfig checkpoint_model_config(const std::string& dir);
// Error unless the checkpoint was written for `config` (names the first difference and the fix).
void require_same_model(const std::string& dir, const CheckpointIndex& index, const ModelConfig& config);

// The tensors a checkpoint holds by what its index records, under the model's global names: each
// parameter of the recorded model (in unit order), then, when it holds optimizer state, every
// `optimizer.FAMILY.PARAM` it lists, each with its parameter's shape. `problems` names each way the
// index contradicts that (a parameter missing or of another shape or dtype, state of no parameter,
// a family missing for some parameters): such an index is damaged.
struct RecordedTensors {
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;  // (name, shape)
  std::vector<std::string> problems;
};
RecordedTensors recorded_tensors(const std::string& dir, const CheckpointIndex& index);

// Error unless `data` is what the checkpoint in dir was trained on, as far as the model can tell: the
// same vocabulary, images normalised the same way with the same classes (the file the checkpoint
// keeps, DataSource::unlike_kept). A model read with another vocabulary of the same size, or other
// normalisation, gives wrong words, losses and accuracies without a sign. `use` says what the
// checkpoint is for ("resume from", "evaluate"). A checkpoint without the file (imported) passes.
void require_same_data(const std::string& dir, const DataSource& data, const std::string& use);

struct LoadReport {
  int64_t step = 0;        // the optimizer step it was saved at
  int64_t bytes_read = 0;  // by this rank
  double seconds = 0.0;
};

// Fills what `held` holds (weights, and optimizer state when it was built with an optimizer, then
// also the optimizer's step count and, given `state`, the trainer state) from the checkpoint in
// dir, whatever layout wrote it. CheckpointDamaged (naming the file) when the checkpoint cannot be
// trusted; Error (naming the fix) when it was written for another model or optimizer.
LoadReport load_checkpoint(const std::string& dir, const ModelConfig& config, RankState& held, Optimizer* optimizer,
                           TrainerState* state);
// A small file of the checkpoint (trainer.json, vocab.txt), checked against its size and checksum
// in the index (CheckpointDamaged when it does not match or is missing).
std::string read_checkpoint_file(const std::string& dir, const std::string& name);
// Weights only, into a model that owns its parameters (eval, generate, train.init_from).
void load_weights(const std::string& dir, const ModelConfig& config, Model& model);

// The complete checkpoints under run_dir/checkpoints (step_N folders, no leftovers), newest first.
std::vector<std::string> checkpoints_newest_first(const std::string& run_dir);
// Removes all but the newest `keep` checkpoints under run_dir/checkpoints, and writers' leftovers.
void prune_checkpoints(const std::string& run_dir, int64_t keep);
// Removes what killed writers of dir left beside it (dir.staging.PID, dir.old.PID, dir.deleting.PID).
void remove_leftovers_of(const std::string& dir);

}  // namespace dtrain
