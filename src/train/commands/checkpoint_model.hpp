// A trained checkpoint's model for the commands that use one (eval, generate, predict): the config it
// was written for and its kind first (for their checks), then the model on the CPU with its weights.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nn/model.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

struct CheckpointModel {
  // The checkpoint's model config (CheckpointDamaged without an index; Error for an unknown kind).
  explicit CheckpointModel(std::string dir);
  // The model planned for batches of up to max_batch samples, with the checkpoint's weights.
  std::unique_ptr<Model> load(int64_t max_batch) const;

  std::string dir;
  ModelConfig config;
  const ModelKind& kind;
  SampleShape sample;  // the kind's sample for this config
};

}  // namespace dtrain
