// The transformer kind (see kind.hpp): its keys, checks and units, as the ModelKind interface asks.
#include "models/transformer/kind.hpp"

#include "models/model_kinds.hpp"
#include "models/transformer/block.hpp"
#include "nn/classifier_head.hpp"
#include "nn/token_embedding.hpp"

namespace dtrain {

namespace {

// The Transformer's embedding and head as every language model has them, under its names.
EmbedHeadShape embed_head_shape(const TransformerConfig& c) {
  EmbedHeadShape s;
  s.vocab_size = c.vocab_size;
  s.seq_len = c.seq_len;
  s.dim = c.dim;
  s.positions = c.learned_positions ? EmbedHeadShape::Positions::learned : EmbedHeadShape::Positions::sinusoidal;
  s.final_norm = c.final_norm ? EmbedHeadShape::FinalNorm::layer : EmbedHeadShape::FinalNorm::none;
  s.norm_eps = c.ln_eps;
  s.tied = c.tied;
  s.head_bias = c.head_bias;
  return s;  // names: embed.weight, pos.weight, norm_f, head (docs/model.md)
}

}  // namespace

UnitList transformer_units(const TransformerConfig& c, ComputeDevice& device, TpSlice slice, TpRegions& regions,
                           SequenceAttention* sequence) {
  c.validate();
  c.validate_tensor_parallel(slice.count, slice.sequence);
  UnitList l;
  l.sample = {InputKind::tokens, c.seq_len, c.seq_len};  // a window of tokens; the next token at each position
  const EmbedHeadShape shape = embed_head_shape(c);
  auto embed = std::make_unique<TokenEmbedding>(device, shape, slice, regions);
  const ParamRef table = embed->table();
  l.modules.push_back(std::move(embed));
  for (int i = 0; i < int(c.layers); ++i) l.modules.push_back(std::make_unique<Block>(device, c, i, slice, regions, sequence));
  l.modules.push_back(std::make_unique<ClassifierHead>(device, shape, c.tied ? &table : nullptr, slice, regions));
  return l;
}

std::unique_ptr<Model> build_transformer(const TransformerConfig& c, int64_t max_batch, ComputeDevice& device,
                                         ParamStorage storage, TpSlice slice, TpRegions& regions, StagePlan stages) {
  return std::make_unique<Model>(transformer_units(c, device, slice, regions), max_batch, device, storage,
                                 std::move(stages));
}

namespace {

class TransformerKind : public LanguageModelKind<TransformerConfig> {
 public:
  std::string name() const override { return "transformer"; }
  std::string about() const override {
    return "a Transformer language model: the course's post-norm encoder-style model, or GPT-2-style pre-norm";
  }
  const ConfigKeyTable<TransformerConfig>& table() const override { return transformer_keys(); }
  // the name its units give the table (embed_head_shape), so that the two cannot drift apart
  std::string embedding_name() const override { return embed_head_shape(TransformerConfig{}).table; }
  std::string describe(const ModelConfig& c) const override {
    const TransformerConfig t = transformer_config(c);
    return "vocab " + std::to_string(t.vocab_size) + ", " + std::to_string(t.layers) + " layers, d " +
           std::to_string(t.dim) + ", " + (t.pre_norm ? "pre-norm" : "post-norm");
  }
  UnitList units(const ModelConfig& c, ComputeDevice& device, TpSlice slice, TpRegions& regions,
                 SequenceAttention* sequence, ExpertExchange* experts) const override {
    refuse_expert_parallel(name(), experts);
    return transformer_units(transformer_config(c), device, slice, regions, sequence);
  }
};

}  // namespace

const ModelKind& transformer_kind() {
  static const TransformerKind kind;
  return kind;
}

}  // namespace dtrain
