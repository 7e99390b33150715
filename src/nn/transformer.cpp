// TransformerLM (see transformer.hpp): unit construction, buffer planning, forward and backward.
#include "nn/transformer.hpp"

#include <cstring>

#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/embedding.hpp"

namespace dtrain {

TransformerLM::TransformerLM(const ModelConfig& c, int64_t max_batch) : c_(c), max_batch_(max_batch) {
  c_.validate();
  const int64_t R = max_batch * c.seq_len, d = c.dim;
  wte_ = embed_unit_.add("embed.weight", {c.vocab_size, d}, Init::xavier);
  if (c.learned_positions) wpe_ = embed_unit_.add("pos.weight", {c.seq_len, d}, Init::xavier);
  units_.push_back(&embed_unit_);
  for (int i = 0; i < c.layers; ++i) {
    blocks_.push_back(std::make_unique<Block>(c_, i, uint32_t(i + 1), arena_, R));
    units_.push_back(&blocks_.back()->unit());
  }
  if (c.final_norm) norm_f_ = LayerNorm(head_unit_, "norm_f", d, c.ln_eps, arena_, R);
  if (!c.tied) head_w_ = head_unit_.add("head.weight", {c.vocab_size, d}, Init::xavier);
  if (c.head_bias) head_b_ = head_unit_.add("head.bias", {c.vocab_size}, Init::fan_in_uniform, d);
  units_.push_back(&head_unit_);

  int64_t total = 0;
  for (Unit* u : units_) total += u->numel();
  params_ = AlignedBuffer(sizeof(float) * total);
  grads_ = AlignedBuffer(sizeof(float) * total);
  int64_t off = 0;
  for (Unit* u : units_) {
    u->bind(params_.f32() + off, grads_.f32() + off);
    off += u->numel();
    for (const auto& p : u->params()) num_params_ += p.numel();
  }

  pos_table_ = arena_.f32(c.seq_len * d);
  sinusoidal_table(pos_table_, c.seq_len, d);
  h0_ = arena_.f32(R * d);
  hf_ = arena_.f32(R * d);
  dhf_ = arena_.f32(R * d);
  ws_ = Workspace{arena_.f32(R * d),          arena_.f32(R * d),          arena_.f32(R * d),
                  arena_.f32(R * d),          arena_.f32(R * 3 * d),      arena_.f32(R * c.ff_dim),
                  arena_.f32(R * c.ff_dim)};
}

void TransformerLM::zero_grad() { std::memset(grads_.data(), 0, grads_.size()); }

const float* TransformerLM::head_weight() const { return c_.tied ? wte_.data() : head_w_.data(); }
float* TransformerLM::head_weight_grad() const { return c_.tied ? wte_.grad() : head_w_.grad(); }

const float* TransformerLM::run_forward(const int32_t* inputs, const StepContext& ctx, UnitHooks* hooks) {
  DT_ASSERT(ctx.B <= max_batch_ && ctx.T <= c_.seq_len);
  const int64_t rows = ctx.rows(), d = c_.dim;
  if (hooks) hooks->pre_forward(embed_unit_);
  embedding_forward(inputs, wte_.data(), c_.learned_positions ? wpe_.data() : pos_table_, h0_, ctx.B,
                    ctx.T, d);
  dropout_forward(h0_, h0_, ctx.B, ctx.T * d, ctx.drop(0, kDropEmbed));
  if (hooks) hooks->post_forward(embed_unit_);
  const float* h = h0_;
  for (auto& b : blocks_) {
    if (hooks) hooks->pre_forward(b->unit());
    b->forward(h, ctx, ws_);
    if (hooks) hooks->post_forward(b->unit());
    h = b->output();
  }
  if (c_.final_norm) {
    norm_f_.forward(h, hf_, rows);
    h = hf_;
  }
  return h;
}

double TransformerLM::forward_backward(const int32_t* inputs, const int32_t* targets,
                                       const StepContext& ctx, UnitHooks* hooks) {
  const int64_t rows = ctx.rows(), d = c_.dim;
  const float* h = run_forward(inputs, ctx, hooks);
  if (hooks) hooks->pre_forward(head_unit_);
  ClassifierArgs a{h, head_weight(), c_.head_bias ? head_b_.data() : nullptr, targets, rows, d,
                   c_.vocab_size, ctx.precision};
  a.grad_scale = ctx.loss_scale;
  a.dx = c_.final_norm ? dhf_ : ws_.grad_a;
  a.dW = head_weight_grad();
  a.dbias = c_.head_bias ? head_b_.grad() : nullptr;
  const double loss = classifier_cross_entropy(a);
  if (hooks) hooks->post_forward(head_unit_);

  if (hooks) hooks->pre_backward(head_unit_);
  if (c_.final_norm) {
    const float* hin = blocks_.empty() ? h0_ : blocks_.back()->output();
    norm_f_.backward(hin, dhf_, ws_.grad_a, rows, false);
  }
  if (hooks) hooks->post_backward(head_unit_);

  float* dout = ws_.grad_a;
  float* dx = ws_.grad_b;
  for (int64_t i = int64_t(blocks_.size()) - 1; i >= 0; --i) {
    Block& b = *blocks_[i];
    if (hooks) hooks->pre_backward(b.unit());
    const float* x = i == 0 ? h0_ : blocks_[i - 1]->output();
    b.backward(x, dout, dx, ctx, ws_);
    if (hooks) hooks->post_backward(b.unit());
    std::swap(dout, dx);
  }
  if (hooks) hooks->pre_backward(embed_unit_);
  dropout_backward(dout, dout, ctx.B, ctx.T * d, ctx.drop(0, kDropEmbed));
  embedding_backward(inputs, dout, wte_.grad(), c_.learned_positions ? wpe_.grad() : nullptr, ctx.B,
                     ctx.T, d);
  if (hooks) hooks->post_backward(embed_unit_);
  return loss;
}

double TransformerLM::forward_loss(const int32_t* inputs, const int32_t* targets, const StepContext& ctx,
                                   float* per_row) {
  StepContext eval = ctx;
  eval.training = false;
  const float* h = run_forward(inputs, eval, nullptr);
  ClassifierArgs a{h, head_weight(), c_.head_bias ? head_b_.data() : nullptr, targets, ctx.rows(),
                   c_.dim, c_.vocab_size, ctx.precision};
  return classifier_cross_entropy(a, per_row);
}

void TransformerLM::logits(const int32_t* inputs, const StepContext& ctx, float* out) {
  StepContext eval = ctx;
  eval.training = false;
  const float* h = run_forward(inputs, eval, nullptr);
  classifier_logits(h, head_weight(), c_.head_bias ? head_b_.data() : nullptr, out, ctx.rows(), c_.dim,
                    c_.vocab_size, ctx.precision);
}

}  // namespace dtrain
