// Helpers for tests that drive a Transformer or a Llama directly: tiny models, and token arrays as the
// batches a model reads.
#pragma once
#include "data/batch.hpp"
#include "models/llama/kind.hpp"
#include "models/transformer/kind.hpp"
#include "nn/model.hpp"

namespace dtrain {

// The fields a test's tiny Transformer sets; every other field is TransformerConfig's default.
struct TinyTransformer {
  int64_t vocab = 0, seq_len = 0, dim = 0, heads = 0, layers = 0, ff_dim = 0;
  float dropout = 0.1f;
  bool pre_norm = false;  // with learned positions; post-norm with sinusoidal ones
  Activation activation = Activation::relu;
  bool tied = false, head_bias = true;
};

inline TransformerConfig tiny_transformer(const TinyTransformer& t) {
  TransformerConfig c;
  c.vocab_size = t.vocab;
  c.seq_len = t.seq_len;
  c.dim = t.dim;
  c.heads = t.heads;
  c.layers = t.layers;
  c.ff_dim = t.ff_dim;
  c.dropout = t.dropout;
  c.pre_norm = t.pre_norm;
  c.learned_positions = t.pre_norm;
  c.activation = t.activation;
  c.tied = t.tied;
  c.head_bias = t.head_bias;
  return c;
}

// A tiny Llama: vocabulary 21, 8 positions, width 16, 4 heads over 2 kv heads, feed-forward 32.
inline LlamaConfig tiny_llama(int64_t layers, float dropout) {
  LlamaConfig c;
  c.vocab_size = 21;
  c.seq_len = 8;
  c.dim = 16;
  c.heads = 4;
  c.kv_heads = 2;
  c.layers = layers;
  c.ff_dim = 32;
  c.dropout = dropout;
  return c;
}

// The units of Llama `l` with a mixture of experts in every block (4 experts of width 16, top 2).
inline UnitList tiny_moe_units(const LlamaConfig& l) {
  return llama_units(l, cpu_device(), {}, no_tp_regions(), nullptr, [l](int block) {
    SparseFeedForward f;
    f.spec = MoeSpec{l.dim, 4, 2, 16};
    f.balance_weight = 0.01f;
    f.layer = block;
    f.layers = l.layers;
    return std::optional<SparseFeedForward>(f);
  });
}

// ctx.B windows of ctx.T tokens (targets may be null: a prediction).
inline BatchView token_batch(const int32_t* inputs, const int32_t* targets, const StepContext& ctx) {
  return {{InputKind::tokens, ctx.T, ctx.T}, ctx.B, inputs, targets};
}

}  // namespace dtrain
