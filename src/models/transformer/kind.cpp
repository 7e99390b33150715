// The transformer kind (see kind.hpp): its keys, checks and units, as the ModelKind interface asks.
#include "models/transformer/kind.hpp"

#include "models/transformer/block.hpp"
#include "nn/lm_head.hpp"
#include "nn/token_embedding.hpp"

namespace dtrain {

namespace {

// The Transformer's embedding and head as every language model has them, under its names.
LmShape lm_shape(const TransformerConfig& c) {
  LmShape s;
  s.vocab_size = c.vocab_size;
  s.seq_len = c.seq_len;
  s.dim = c.dim;
  s.positions = c.learned_positions ? LmShape::Positions::learned : LmShape::Positions::sinusoidal;
  s.final_norm = c.final_norm ? LmShape::FinalNorm::layer : LmShape::FinalNorm::none;
  s.norm_eps = c.ln_eps;
  s.tied = c.tied;
  s.head_bias = c.head_bias;
  return s;  // names: embed.weight, pos.weight, norm_f, head (docs/model.md)
}

}  // namespace

UnitList transformer_units(const TransformerConfig& c, ComputeDevice& device, TpSlice slice, TpRegions& regions) {
  c.validate();
  c.validate_tensor_parallel(slice.count, slice.sequence);
  UnitList l;
  l.sample = {InputKind::tokens, c.seq_len, c.seq_len};  // a window of tokens; the next token at each position
  const LmShape shape = lm_shape(c);
  auto embed = std::make_unique<TokenEmbedding>(device, shape, slice, regions);
  const ParamRef table = embed->table();
  l.modules.push_back(std::move(embed));
  for (int i = 0; i < int(c.layers); ++i) l.modules.push_back(std::make_unique<Block>(device, c, i, slice, regions));
  l.modules.push_back(std::make_unique<LmHead>(device, shape, c.tied ? &table : nullptr, slice, regions));
  return l;
}

std::unique_ptr<Model> build_transformer(const TransformerConfig& c, int64_t max_batch, ComputeDevice& device,
                                         ParamStorage storage, TpSlice slice, TpRegions& regions, StagePlan stages) {
  return std::make_unique<Model>(transformer_units(c, device, slice, regions), max_batch, device, storage,
                                 std::move(stages));
}

namespace {

class TransformerKind : public ModelKind {
 public:
  std::string name() const override { return "transformer"; }
  std::string about() const override {
    return "a Transformer language model: the course's post-norm encoder-style model, or GPT-2-style pre-norm";
  }
  std::string describe_keys() const override {
    const TransformerConfig defaults;
    std::string out;
    for (const auto& [k, key] : transformer_keys())
      out += describe_config_key(k, key.get(defaults), key.type, key.lo, key.hi, key.help);
    return out;
  }
  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    for (const auto& [k, key] : transformer_keys()) out.push_back(k.substr(6));
    return out;
  }
  Json parse(const std::string& name, const std::string& text, const std::string& origin) const override {
    auto it = transformer_keys().find("model." + name);
    DT_ASSERT(it != transformer_keys().end());
    TransformerConfig t;
    try {
      it->second.set(t, text);
    } catch (const Error& e) {
      std::string msg = e.what();
      auto p = msg.find("(--set)");
      if (p != std::string::npos) msg.replace(p, 7, "(" + origin + ")");
      throw Error(msg);
    }
    return it->second.get(t);
  }
  Json complete(const ModelConfig& c) const override {
    const TransformerConfig t = transformer_config(c);
    Json out = Json::object();
    out["kind"] = name();
    for (const auto& [k, key] : transformer_keys()) out[k.substr(6)] = key.get(t);
    return out;
  }
  void validate(const ModelConfig& c, bool data_known) const override {
    const TransformerConfig t = transformer_config(c);
    t.validate(data_known || t.vocab_size > 0);
    for (const auto& [k, key] : transformer_keys())
      if (key.type == "int") require_config_range(k, key.get(t).get<int64_t>(), key.lo, key.hi, key.help);
  }
  void fit_to_data(ModelConfig& c, const DataFacts& data, const std::string& data_name) const override {
    const int64_t given = transformer_config(c).vocab_size;
    require(given == 0 || given == data.vocab_size,
            "model.vocab_size = " + std::to_string(given) + " but the vocabulary of " + data_name + " has " +
                std::to_string(data.vocab_size) +
                " words: leave model.vocab_size out (it is taken from the data), or point data.dir at the data "
                "the model is meant for");
    c.values["vocab_size"] = data.vocab_size;
  }
  void fit_to_weights(ModelConfig& c, const std::map<std::string, std::vector<int64_t>>& shapes,
                      const std::string& file) const override {
    auto it = shapes.find("embed.weight");  // the vocabulary size is the embedding's rows
    require(it != shapes.end() && it->second.size() == 2,
            file + ": embed.weight is " + (it == shapes.end() ? "missing" : "not a matrix [vocab, dim]") +
                ": it is not a dtrain Transformer (model.kind = transformer)");
    c.values["vocab_size"] = it->second[0];
  }
  SampleShape sample_shape(const ModelConfig& c) const override {
    const int64_t T = transformer_config(c).seq_len;
    return {InputKind::tokens, T, T};
  }
  Metric metric() const override { return Metric::perplexity; }
  float dropout(const ModelConfig& c) const override { return transformer_config(c).dropout; }
  std::string describe(const ModelConfig& c) const override {
    const TransformerConfig t = transformer_config(c);
    return "vocab " + std::to_string(t.vocab_size) + ", " + std::to_string(t.layers) + " layers, d " +
           std::to_string(t.dim) + ", " + (t.pre_norm ? "pre-norm" : "post-norm");
  }
  UnitList units(const ModelConfig& c, ComputeDevice& device, TpSlice slice, TpRegions& regions) const override {
    return transformer_units(transformer_config(c), device, slice, regions);
  }
};

}  // namespace

const ModelKind& transformer_kind() {
  static const TransformerKind kind;
  return kind;
}

}  // namespace dtrain
