// CheckpointModel (see checkpoint_model.hpp).
#include "train/commands/checkpoint_model.hpp"

#include "models/registry.hpp"
#include "train/checkpoint/checkpoint.hpp"

namespace dtrain {

CheckpointModel::CheckpointModel(std::string d)
    : dir(std::move(d)),
      config(checkpoint_model_config(dir)),
      kind(kind_of(config)),
      sample(kind.sample_shape(config)) {}

std::unique_ptr<Model> CheckpointModel::load(int64_t max_batch) const {
  auto model = std::make_unique<Model>(kind.units(config, cpu_device()), max_batch);
  load_weights(dir, config, *model);
  return model;
}

}  // namespace dtrain
