// The Transformer language model's hyper-parameters (docs/model.md defines each one): its model.*
// keys as a table, their validation, and the form the rest of dtrain keeps them in (ModelConfig).
#pragma once
#include <cstdint>
#include <string>

#include "core/config_keys.hpp"
#include "kernels/types.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

struct TransformerConfig {
  int64_t vocab_size = 0;
  int64_t seq_len = 32;
  int64_t dim = 128;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t ff_dim = 2048;
  Activation activation = Activation::relu;
  bool pre_norm = false;
  bool learned_positions = false;
  bool final_norm = true;
  bool tied = false;
  bool head_bias = true;
  float dropout = 0.1f;
  bool causal = true;
  float ln_eps = 1e-5f;

  // Throws Error naming the bad key and the fix (vocab_size too unless it comes from the data).
  void validate(bool vocab_known = true) const;
  // Tensor parallelism over `slices`: heads and feed-forward width must divide (and the
  // sequence, when it is split too); throws naming which.
  void validate_tensor_parallel(int slices, bool sequence) const;
};

// The keys, named model.<name>.
const ConfigKeyTable<TransformerConfig>& transformer_keys();
// The typed config of a ModelConfig of this kind (its values over the defaults), and back.
TransformerConfig transformer_config(const ModelConfig& c);
ModelConfig to_model_config(const TransformerConfig& t);

}  // namespace dtrain
