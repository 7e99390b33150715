// MoeConfig: its key table (the Llama kind's and the experts') and validation.
#include "models/moe/config.hpp"

#include "core/error.hpp"
#include "models/model_kinds.hpp"

namespace dtrain {

const ConfigKeyTable<MoeConfig>& moe_keys() {
  static const ConfigKeyTable<MoeConfig> k = [] {
    ConfigKeyTable<MoeConfig> t;
    for (const auto& [name, key] : llama_keys())  // the decoder's keys, on the base of a MoeConfig
      t[name] = {key.type, key.help, key.lo, key.hi,
                 [set = key.set](MoeConfig& c, const std::string& v) { set(c, v); },
                 [get = key.get](const MoeConfig& c) { return get(c); }};
    const ConfigKeyTable<MoeConfig> own = {
        DT_INT_KEY("model.experts", experts, 1, 1 << 16, "experts in each mixture-of-experts block"),
        DT_INT_KEY("model.top_k", top_k, 1, 1 << 16, "experts each token goes through; at most model.experts"),
        DT_INT_KEY("model.expert_ff", expert_ff, 0, 1 << 24,
                   "each expert's SwiGLU width (Qwen's moe_intermediate_size); 0: the dense width / top_k, a multiple of 16"),
        DT_INT_KEY("model.moe_every", moe_every, 1, 1 << 16,
                   "block i is a mixture of experts when i + 1 is a multiple of it (1: every block); the others are dense"),
        DT_CHOICE_KEY("model.router", router, "softmax|sigmoid",
                      "the router's scores: softmax over the experts (Mixtral, Qwen) or each one's sigmoid (DeepSeek-V3)"),
        DT_BOOL_KEY("model.norm_topk", norm_topk, "the chosen experts' scores renormalised to sum 1 (their weights)"),
        DT_FLOAT_KEY("model.aux_loss_coef", aux_loss_coef,
                     "coefficient of the sequence-wise load-balancing loss (mean over the MoE blocks); 0: none"),
        DT_FLOAT_KEY("model.capacity_factor", capacity_factor,
                     "0: dropless (every token reaches its experts); else each expert takes at most "
                     "ceil(factor · seq_len · top_k / experts) token copies of a sequence, the first in token order, "
                     "and drops (and counts) the rest"),
        DT_INT_KEY("model.shared_ff", shared_ff, 0, 1 << 24,
                   "width of a shared SwiGLU expert every token goes through besides its routed ones "
                   "(DeepSeek's shared_experts); 0: none, else a multiple of 16"),
    };
    t.insert(own.begin(), own.end());
    return t;
  }();
  return k;
}

MoeConfig moe_config(const ModelConfig& c) { return config_from(c, moe_keys()); }

void MoeConfig::validate(bool vocab_known) const {
  LlamaConfig::validate(vocab_known);
  require(top_k <= experts, "model.top_k = " + std::to_string(top_k) + " is more than model.experts = " +
                                std::to_string(experts) + ": a token goes through at most every expert");
  require(moe_every <= layers, "model.moe_every = " + std::to_string(moe_every) + " leaves none of the " +
                                   std::to_string(layers) + " blocks a mixture of experts: use at most model.layers");
  // (dim is a multiple of 16, so each expert's gate and up projections fill whole 64-byte lines and
  // multiply as one matrix)
  require(aux_loss_coef >= 0.0f, "model.aux_loss_coef must not be negative: use e.g. 0.01, or 0 for none");
  require(capacity_factor >= 0.0f, "model.capacity_factor must not be negative: use 0 (dropless) or e.g. 1.25");
  require(shared_ff % 16 == 0, "model.shared_ff = " + std::to_string(shared_ff) +
                                   " is not a multiple of 16: use e.g. " + std::to_string((shared_ff + 15) / 16 * 16));
}

}  // namespace dtrain
