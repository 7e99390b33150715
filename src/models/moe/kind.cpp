// The moe kind (see kind.hpp).
#include "models/moe/kind.hpp"

#include "models/llama/kind.hpp"
#include "models/model_kinds.hpp"

namespace dtrain {

namespace {

class MoeKind : public LanguageModelKind<MoeConfig> {
 public:
  std::string name() const override { return "moe"; }
  std::string about() const override {
    return "a mixture-of-experts decoder: the Llama kind with top-k routed SwiGLU experts (Qwen3-MoE's names)";
  }
  const ConfigKeyTable<MoeConfig>& table() const override { return moe_keys(); }
  std::string embedding_name() const override { return llama_embed_head_shape(LlamaConfig{}).table; }
  std::string describe(const ModelConfig& c) const override {
    const MoeConfig t = moe_config(c);
    return "vocab " + std::to_string(t.vocab_size) + ", " + std::to_string(t.layers) + " layers, d " +
           std::to_string(t.dim) + ", " + std::to_string(t.heads) + " heads / " + std::to_string(t.kv()) +
           " kv heads, " + std::to_string(t.experts) + " experts of ff " + std::to_string(t.expert_width()) +
           ", top " + std::to_string(t.top_k) + " (" + t.router + ")";
  }
  UnitList units(const ModelConfig& c, ComputeDevice& device, TpSlice slice, TpRegions& regions,
                 SequenceAttention* sequence, ExpertExchange* experts) const override {
    return moe_units(moe_config(c), device, slice, regions, sequence, experts);
  }
};

}  // namespace

UnitList moe_units(const MoeConfig& c, ComputeDevice& device, TpSlice slice, TpRegions& regions,
                   SequenceAttention* sequence, ExpertExchange* experts) {
  c.validate();
  require(!slice.splits_rows(), "model.kind = moe routes whole rows: parallel.tp_sequence = true (sequence "
                                "parallel) is not supported for it yet: set it false, or use parallel.tp = 1");
  for (const auto& [key, width] : {std::pair<const char*, int64_t>{"model.expert_ff", c.expert_width()},
                                   {"model.shared_ff", c.shared_ff}})
    require(width % slice.count == 0, std::string(key) + " = " + std::to_string(width) +
                                          " does not split into parallel.tp = " + std::to_string(slice.count) +
                                          " equal slices: choose a multiple of " + std::to_string(slice.count));
  require(!sequence || c.capacity_factor == 0.0f,
          "model.capacity_factor takes a sequence's tokens in order, and context parallel splits the sequence: "
          "use model.capacity_factor = 0 (dropless) under parallel.cp > 1");
  if (experts)
    require(c.experts % experts->ranks() == 0,
            "parallel.ep = " + std::to_string(experts->ranks()) + " does not divide model.experts = " +
                std::to_string(c.experts) + ": every expert-parallel rank holds an equal share of the experts; "
                "choose an ep that divides it");
  SparseFeedForward sparse;
  sparse.exchange = experts;
  sparse.spec.dim = c.dim;
  sparse.spec.experts = c.experts;
  sparse.spec.top_k = c.top_k;
  sparse.spec.expert_ff = c.expert_width();
  sparse.spec.sigmoid = c.router == "sigmoid";
  sparse.spec.normalize = c.norm_topk;
  sparse.spec.capacity_factor = c.capacity_factor;
  sparse.shared_ff = c.shared_ff;
  sparse.balance_weight = c.aux_loss_coef / float(c.sparse_blocks());
  return llama_units(c, device, slice, regions, sequence, [&](int block) -> std::optional<SparseFeedForward> {
    if (!c.sparse(block)) return std::nullopt;
    SparseFeedForward s = sparse;
    s.layer = (block + 1) / c.moe_every - 1;
    s.layers = c.sparse_blocks();
    return s;
  });
}

const ModelKind& moe_kind() {
  static const MoeKind kind;
  return kind;
}

}  // namespace dtrain
