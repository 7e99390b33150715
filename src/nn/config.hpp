// The model's hyper-parameters (docs/model.md defines what each one means) and their validation.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/cpu/activation.hpp"

namespace dtrain {

struct ModelConfig {
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

  // Throws Error naming the bad key and the fix.
  void validate() const;
  // Tensor parallelism over `slices`: heads and feed-forward width must divide (and the
  // sequence, when it is split too); throws naming which.
  void validate_tensor_parallel(int slices, bool sequence) const;
  // Parameter count (what a checkpoint of this model holds).
  int64_t num_params() const;
  // Training FLOPs per token: 6 * (matmul parameters) + attention (see docs/model.md).
  double train_flops_per_token() const;
};

}  // namespace dtrain
