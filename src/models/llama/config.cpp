// LlamaConfig: its key table and validation.
#include "models/llama/config.hpp"

#include "core/error.hpp"
#include "models/model_kinds.hpp"
#include "models/tp_checks.hpp"

namespace dtrain {

const ConfigKeyTable<LlamaConfig>& llama_keys() {
  constexpr int64_t kMaxCount = int64_t(1) << 31;
  static const ConfigKeyTable<LlamaConfig> k = {
      DT_INT_KEY("model.vocab_size", vocab_size, 0, kMaxCount,
                 "words in the vocabulary; 0: taken from the data (a value the data contradicts is refused)"),
      DT_INT_KEY("model.seq_len", seq_len, 1, 1 << 20, "tokens per window (the context length)"),
      DT_INT_KEY("model.dim", dim, 1, 1 << 20, "width of the hidden state; a multiple of 16"),
      DT_INT_KEY("model.heads", heads, 1, 1 << 16, "query heads per layer; must divide model.dim"),
      DT_INT_KEY("model.kv_heads", kv_heads, 0, 1 << 16,
                 "key/value heads (grouped-query attention); must divide model.heads; 0: as many as model.heads"),
      DT_INT_KEY("model.layers", layers, 1, 1 << 16, "decoder blocks"),
      DT_INT_KEY("model.ff_dim", ff_dim, 0, 1 << 24,
                 "SwiGLU hidden width; 0: 8·dim/3 rounded up to a multiple of 256"),
      DT_FLOAT_KEY("model.rope_theta", rope_theta, "RoPE's base θ (Llama 2: 10000, Llama 3: 500000)"),
      DT_FLOAT_KEY("model.norm_eps", norm_eps, "RMSNorm's epsilon"),
      DT_BOOL_KEY("model.tied", tied, "the classifier reuses the embedding's weights"),
      DT_FLOAT_KEY("model.dropout", dropout, "dropout probability after attention and feed-forward, 0 to below 1"),
      DT_BOOL_KEY("model.causal", causal, "each position sees only earlier ones"),
  };
  return k;
}

LlamaConfig llama_config(const ModelConfig& c) { return config_from(c, llama_keys()); }

void LlamaConfig::validate(bool vocab_known) const {
  auto pos = [](const char* key, int64_t v) {
    require(v > 0, std::string("model.") + key + " = " + std::to_string(v) + " must be positive: set it with --set model." +
                       key + "=N");
  };
  if (vocab_known) pos("vocab_size", vocab_size);
  pos("seq_len", seq_len);
  pos("dim", dim);
  pos("heads", heads);
  pos("layers", layers);
  require(dim % heads == 0 && head_dim() % 2 == 0,
          "model.heads = " + std::to_string(heads) + " does not give model.dim = " + std::to_string(dim) +
              " an even head width: choose heads so that dim / heads is even (RoPE rotates pairs)");
  require(heads % kv() == 0, "model.kv_heads = " + std::to_string(kv_heads) + " does not divide model.heads = " +
                                 std::to_string(heads) + ": each key/value head serves a whole group of query heads");
  // q, k and v (gate and up) are multiplied as one matrix: each must fill whole 64-byte lines of the unit
  require(dim % 16 == 0, "model.dim = " + std::to_string(dim) + " is not a multiple of 16: the Llama kind needs it "
                         "(its q, k and v projections are multiplied as one matrix)");
  require(dropout >= 0.0f && dropout < 1.0f,
          "model.dropout = " + std::to_string(dropout) + " is outside [0, 1): use a rate such as 0.1, or 0");
  require(norm_eps > 0.0f, "model.norm_eps must be positive: use e.g. 1e-5");
  require(rope_theta > 1.0f, "model.rope_theta must be above 1: use e.g. 10000");
}

void LlamaConfig::validate_tensor_parallel(int slices, bool sequence) const {
  if (slices == 1) return;
  require_tp_divides(slices, "model.heads", heads,
                     "choose a tp that divides the number of heads (each rank owns whole heads)");
  require_tp_divides(slices, "model.kv_heads", kv(),
                     "choose a tp that divides the key/value heads (each rank owns whole groups)");
  require_tp_divides(slices, "the feed-forward width (model.ff_dim)", ff(), "choose a tp that divides it");
  if (sequence) require_tp_divides_seq_len(slices, seq_len);
}

}  // namespace dtrain
