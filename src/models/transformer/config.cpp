// TransformerConfig: its key table, validation, and conversion from and to ModelConfig.
#include "models/transformer/config.hpp"

#include "core/error.hpp"
#include "models/model_kinds.hpp"
#include "models/tp_checks.hpp"

namespace dtrain {

namespace {
constexpr int64_t kMaxCount = int64_t(1) << 31;

// A choice kept as a bool or enum: `assign` sets it from the chosen word, `read` gives the word back.
#define DT_FLAG_CHOICE_KEY(name, choices, help, assign, read)                                              \
  {name, {choices, help, 0, 0,                                                                             \
          [](TransformerConfig& c, const std::string& v) { assign(parse_config_choice(name, v, "--set", choices)); }, \
          [](const TransformerConfig& c) { return Json(read); }}}
}  // namespace

const ConfigKeyTable<TransformerConfig>& transformer_keys() {
  static const ConfigKeyTable<TransformerConfig> k = {
      DT_INT_KEY("model.vocab_size", vocab_size, 0, kMaxCount,
                 "words in the vocabulary; 0: taken from the data (a value the data contradicts is refused)"),
      DT_INT_KEY("model.seq_len", seq_len, 1, 1 << 20, "tokens per window (the context length)"),
      DT_INT_KEY("model.dim", dim, 1, 1 << 20, "width of the hidden state (embedding dimension)"),
      DT_INT_KEY("model.heads", heads, 1, 1 << 16, "attention heads per layer; must divide model.dim"),
      DT_INT_KEY("model.layers", layers, 1, 1 << 16, "Transformer blocks"),
      DT_INT_KEY("model.ff_dim", ff_dim, 1, 1 << 24, "width of each block's feed-forward layer"),
      DT_FLAG_CHOICE_KEY("model.activation", "relu|gelu", "feed-forward activation",
                         [&](const std::string& w) { c.activation = w == "relu" ? Activation::relu : Activation::gelu; },
                         c.activation == Activation::relu ? "relu" : "gelu"),
      DT_FLAG_CHOICE_KEY("model.norm", "post|pre",
                         "LayerNorm after each residual (post, the course's) or before each sub-layer (pre, GPT-2's)",
                         [&](const std::string& w) { c.pre_norm = w == "pre"; }, c.pre_norm ? "pre" : "post"),
      DT_FLAG_CHOICE_KEY("model.positions", "sinusoidal|learned",
                         "position embeddings: fixed sinusoids, or learned as parameters",
                         [&](const std::string& w) { c.learned_positions = w == "learned"; },
                         c.learned_positions ? "learned" : "sinusoidal"),
      DT_BOOL_KEY("model.final_norm", final_norm, "a LayerNorm before the classifier"),
      DT_BOOL_KEY("model.tied", tied, "the classifier reuses the embedding's weights"),
      DT_BOOL_KEY("model.head_bias", head_bias, "the classifier has a bias"),
      DT_FLOAT_KEY("model.dropout", dropout, "dropout probability in every block, 0 to below 1"),
      DT_BOOL_KEY("model.causal", causal,
                  "each position sees only earlier ones; false reproduces the course's missing mask (a bug)"),
      DT_FLOAT_KEY("model.ln_eps", ln_eps, "LayerNorm's epsilon"),
  };
  return k;
}

TransformerConfig transformer_config(const ModelConfig& c) { return config_from(c, transformer_keys()); }

ModelConfig to_model_config(const TransformerConfig& t) {
  ModelConfig c;
  c.kind = "transformer";
  for (const auto& [key, k] : transformer_keys()) c.values[key.substr(6)] = k.get(t);
  return c;
}

void TransformerConfig::validate(bool vocab_known) const {
  auto pos = [](const char* key, int64_t v) {
    require(v > 0, std::string("model.") + key + " = " + std::to_string(v) +
                       " must be positive: set it to a value > 0 in the config or with --set model." +
                       key + "=N");
  };
  if (vocab_known) pos("vocab_size", vocab_size);
  pos("seq_len", seq_len);
  pos("dim", dim);
  pos("heads", heads);
  pos("layers", layers);
  pos("ff_dim", ff_dim);
  require(dim % heads == 0, "model.heads = " + std::to_string(heads) + " does not divide model.dim = " +
                                std::to_string(dim) + ": choose heads so that dim % heads == 0");
  require(dim % 2 == 0 || learned_positions,
          "model.dim = " + std::to_string(dim) + " is odd: sinusoidal positions need an even dim");
  require(dropout >= 0.0f && dropout < 1.0f, "model.dropout = " + std::to_string(dropout) +
                                                 " is outside [0, 1): use a rate such as 0.1");
  require(ln_eps > 0.0f, "model.ln_eps must be positive: use e.g. 1e-5");
}

void TransformerConfig::validate_tensor_parallel(int slices, bool sequence) const {
  if (slices == 1) return;
  require_tp_divides(slices, "model.heads", heads,
                     "choose a tp that divides the number of heads (each rank owns whole heads)");
  require_tp_divides(slices, "model.ff_dim", ff_dim, "choose a tp that divides the feed-forward width");
  if (sequence) require_tp_divides_seq_len(slices, seq_len);
}

}  // namespace dtrain
