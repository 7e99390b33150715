// The llama kind (see kind.hpp).
#include "models/llama/kind.hpp"

#include "models/model_kinds.hpp"
#include "models/llama/block.hpp"
#include "nn/classifier_head.hpp"
#include "nn/token_embedding.hpp"

namespace dtrain {

namespace {

}  // namespace

EmbedHeadShape llama_embed_head_shape(const LlamaConfig& c) {
  EmbedHeadShape s;
  s.vocab_size = c.vocab_size;
  s.seq_len = c.seq_len;
  s.dim = c.dim;
  s.positions = EmbedHeadShape::Positions::none;  // the blocks rotate q and k (RoPE)
  s.final_norm = EmbedHeadShape::FinalNorm::rms;
  s.norm_eps = c.norm_eps;
  s.tied = c.tied;
  s.head_bias = false;
  s.table = "model.embed_tokens.weight";
  s.norm = "model.norm";
  s.head = "lm_head";
  return s;
}

namespace {

class LlamaKind : public LanguageModelKind<LlamaConfig> {
 public:
  std::string name() const override { return "llama"; }
  std::string about() const override {
    return "a Llama-style decoder: RMSNorm, rotary positions, grouped-query attention, SwiGLU, no biases";
  }
  const ConfigKeyTable<LlamaConfig>& table() const override { return llama_keys(); }
  // the name its units give the table (embed_head_shape), so that the two cannot drift apart
  std::string embedding_name() const override { return llama_embed_head_shape(LlamaConfig{}).table; }
  std::string describe(const ModelConfig& c) const override {
    const LlamaConfig t = llama_config(c);
    return "vocab " + std::to_string(t.vocab_size) + ", " + std::to_string(t.layers) + " layers, d " +
           std::to_string(t.dim) + ", " + std::to_string(t.heads) + " heads / " + std::to_string(t.kv()) +
           " kv heads, ff " + std::to_string(t.ff());
  }
  UnitList units(const ModelConfig& c, ComputeDevice& device, TpSlice slice, TpRegions& regions,
                 SequenceAttention* sequence, ExpertExchange* experts) const override {
    refuse_expert_parallel(name(), experts);
    return llama_units(llama_config(c), device, slice, regions, sequence);
  }
};

}  // namespace

UnitList llama_units(const LlamaConfig& c, ComputeDevice& device, TpSlice slice, TpRegions& regions,
                     SequenceAttention* sequence, const SparseBlocks& sparse) {
  c.validate();
  c.validate_tensor_parallel(slice.count, slice.sequence);
  UnitList l;
  l.sample = {InputKind::tokens, c.seq_len, c.seq_len};
  const EmbedHeadShape shape = llama_embed_head_shape(c);
  auto embed = std::make_unique<TokenEmbedding>(device, shape, slice, regions);
  const ParamRef table = embed->table();
  l.modules.push_back(std::move(embed));
  for (int i = 0; i < int(c.layers); ++i) {
    const std::optional<SparseFeedForward> ff = sparse ? sparse(i) : std::nullopt;
    l.modules.push_back(std::make_unique<LlamaBlock>(device, c, i, slice, regions, sequence, ff ? &*ff : nullptr));
  }
  l.modules.push_back(std::make_unique<ClassifierHead>(device, shape, c.tied ? &table : nullptr, slice, regions));
  return l;
}

const ModelKind& llama_kind() {
  static const LlamaKind kind;
  return kind;
}

}  // namespace dtrain
