// The llama kind (see kind.hpp).
#include "models/llama/kind.hpp"

#include "models/llama/block.hpp"
#include "nn/lm_head.hpp"
#include "nn/token_embedding.hpp"

namespace dtrain {

namespace {

LmShape lm_shape(const LlamaConfig& c) {
  LmShape s;
  s.vocab_size = c.vocab_size;
  s.seq_len = c.seq_len;
  s.dim = c.dim;
  s.positions = LmShape::Positions::none;  // the blocks rotate q and k (RoPE)
  s.final_norm = LmShape::FinalNorm::rms;
  s.norm_eps = c.norm_eps;
  s.tied = c.tied;
  s.head_bias = false;
  s.table = "model.embed_tokens.weight";
  s.norm = "model.norm";
  s.head = "lm_head";
  return s;
}

class LlamaKind : public ModelKind {
 public:
  std::string name() const override { return "llama"; }
  std::string about() const override {
    return "a Llama-style decoder: RMSNorm, rotary positions, grouped-query attention, SwiGLU, no biases";
  }
  std::string describe_keys() const override {
    const LlamaConfig defaults;
    std::string out;
    for (const auto& [k, key] : llama_keys())
      out += describe_config_key(k, key.get(defaults), key.type, key.lo, key.hi, key.help);
    return out;
  }
  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    for (const auto& [k, key] : llama_keys()) out.push_back(k.substr(6));
    return out;
  }
  Json parse(const std::string& name, const std::string& text, const std::string& origin) const override {
    auto it = llama_keys().find("model." + name);
    DT_ASSERT(it != llama_keys().end());
    LlamaConfig t;
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
    const LlamaConfig t = llama_config(c);
    Json out = Json::object();
    out["kind"] = name();
    for (const auto& [k, key] : llama_keys()) out[k.substr(6)] = key.get(t);
    return out;
  }
  void validate(const ModelConfig& c, bool data_known) const override {
    const LlamaConfig t = llama_config(c);
    t.validate(data_known || t.vocab_size > 0);
    for (const auto& [k, key] : llama_keys())
      if (key.type == "int") require_config_range(k, key.get(t).get<int64_t>(), key.lo, key.hi, key.help);
  }
  void fit_to_data(ModelConfig& c, const DataFacts& data, const std::string& data_name) const override {
    const int64_t given = llama_config(c).vocab_size;
    require(given == 0 || given == data.vocab_size,
            "model.vocab_size = " + std::to_string(given) + " but the vocabulary of " + data_name + " has " +
                std::to_string(data.vocab_size) +
                " words: leave model.vocab_size out (it is taken from the data), or point data.dir at the data "
                "the model is meant for");
    c.values["vocab_size"] = data.vocab_size;
  }
  void fit_to_weights(ModelConfig& c, const std::map<std::string, std::vector<int64_t>>& shapes,
                      const std::string& file) const override {
    auto it = shapes.find("model.embed_tokens.weight");  // the vocabulary size is the embedding's rows
    require(it != shapes.end() && it->second.size() == 2,
            file + ": model.embed_tokens.weight is " + (it == shapes.end() ? "missing" : "not a matrix [vocab, dim]") +
                ": it is not a Llama model (model.kind = llama)");
    c.values["vocab_size"] = it->second[0];
  }
  SampleShape sample_shape(const ModelConfig& c) const override {
    const int64_t T = llama_config(c).seq_len;
    return {InputKind::tokens, T, T};
  }
  Metric metric() const override { return Metric::perplexity; }
  float dropout(const ModelConfig& c) const override { return llama_config(c).dropout; }
  std::string describe(const ModelConfig& c) const override {
    const LlamaConfig t = llama_config(c);
    return "vocab " + std::to_string(t.vocab_size) + ", " + std::to_string(t.layers) + " layers, d " +
           std::to_string(t.dim) + ", " + std::to_string(t.heads) + " heads / " + std::to_string(t.kv()) +
           " kv heads, ff " + std::to_string(t.ff());
  }
  UnitList units(const ModelConfig& c, ComputeDevice& device, TpSlice slice, TpRegions& regions) const override {
    return llama_units(llama_config(c), device, slice, regions);
  }
};

}  // namespace

UnitList llama_units(const LlamaConfig& c, ComputeDevice& device, TpSlice slice, TpRegions& regions) {
  c.validate();
  c.validate_tensor_parallel(slice.count, slice.sequence);
  UnitList l;
  l.sample = {InputKind::tokens, c.seq_len, c.seq_len};
  const LmShape shape = lm_shape(c);
  auto embed = std::make_unique<TokenEmbedding>(device, shape, slice, regions);
  const ParamRef table = embed->table();
  l.modules.push_back(std::move(embed));
  for (int i = 0; i < int(c.layers); ++i) l.modules.push_back(std::make_unique<LlamaBlock>(device, c, i, slice, regions));
  l.modules.push_back(std::make_unique<LmHead>(device, shape, c.tied ? &table : nullptr, slice, regions));
  return l;
}

const ModelKind& llama_kind() {
  static const LlamaKind kind;
  return kind;
}

}  // namespace dtrain
