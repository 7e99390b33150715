// ModelConfig validation and counts.
#include "nn/config.hpp"

#include "core/error.hpp"

namespace dtrain {

void ModelConfig::validate() const {
  auto pos = [](const char* key, int64_t v) {
    require(v > 0, std::string("model.") + key + " = " + std::to_string(v) +
                       " must be positive: set it to a value > 0 in the config or with --set model." +
                       key + "=N");
  };
  pos("vocab_size", vocab_size);
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

void ModelConfig::validate_tensor_parallel(int slices, bool sequence) const {
  if (slices == 1) return;
  const std::string tp = "parallel.tp = " + std::to_string(slices);
  auto divides = [&](const char* what, int64_t v, const char* fix) {
    require(v % slices == 0, tp + " does not divide " + what + " = " + std::to_string(v) + ": " + fix);
  };
  divides("model.heads", heads, "choose a tp that divides the number of heads (each rank owns whole heads)");
  divides("model.ff_dim", ff_dim, "choose a tp that divides the feed-forward width");
  if (sequence)
    divides("model.seq_len", seq_len, "sequence parallel splits each sample's positions: choose a tp that divides "
                                      "seq_len, or set parallel.tp_sequence=false");
}

int64_t ModelConfig::num_params() const {
  const int64_t d = dim, f = ff_dim, V = vocab_size;
  int64_t n = V * d + (learned_positions ? seq_len * d : 0);
  n += layers * (3 * d * d + 3 * d + d * d + d + 2 * d + f * d + f + d * f + d + 2 * d);
  if (final_norm) n += 2 * d;
  if (!tied) n += V * d;
  if (head_bias) n += V;
  return n;
}

double ModelConfig::train_flops_per_token() const {
  const double d = double(dim), f = double(ff_dim), V = double(vocab_size), L = double(layers);
  const double matmul_params = L * (4 * d * d + 2 * d * f) + V * d;
  // attention scores and weighted sum: 2 matmuls of T x d per token forward, x3 for fwd+bwd;
  // causal masking halves the useful work, which we do not claim.
  const double attention = 6.0 * 2.0 * L * double(seq_len) * d;
  return 6.0 * matmul_params + attention;
}

}  // namespace dtrain
