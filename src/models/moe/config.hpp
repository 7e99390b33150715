// The mixture-of-experts decoder's hyper-parameters (model.kind = moe): the Llama kind's keys and
// the experts' (docs/model.md's MoE section says what each one means), their validation, and the
// conversion from the generic ModelConfig.
#pragma once
#include <string>

#include "models/llama/config.hpp"

namespace dtrain {

struct MoeConfig : LlamaConfig {
  int64_t experts = 8;
  int64_t top_k = 2;
  int64_t expert_ff = 0;  // each expert's SwiGLU width; 0: the dense width (model.ff_dim's rule) / top_k
  int64_t moe_every = 1;  // block i is a mixture of experts when (i + 1) is a multiple of it (Qwen's step)
  std::string router = "softmax";
  bool norm_topk = true;
  float aux_loss_coef = 0.01f;
  float capacity_factor = 0.0f;  // 0: dropless
  int64_t shared_ff = 0;         // a shared expert's width; 0: none

  int64_t expert_width() const { return expert_ff > 0 ? expert_ff : std::max<int64_t>(16, ff() / top_k / 16 * 16); }
  bool sparse(int64_t block) const { return (block + 1) % moe_every == 0; }
  int64_t sparse_blocks() const { return layers / moe_every; }
  // Throws Error naming the bad key and the fix.
  void validate(bool vocab_known = true) const;
};

const ConfigKeyTable<MoeConfig>& moe_keys();
MoeConfig moe_config(const ModelConfig& c);

}  // namespace dtrain
