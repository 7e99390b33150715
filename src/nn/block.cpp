// Transformer block forward and backward (see block.hpp). Post-norm: y = LN(x + drop(f(x)));
// pre-norm: y = x + drop(f(LN(x))). The feed-forward activation is recomputed in backward
// instead of stored (it is the largest activation).
#include "nn/block.hpp"

namespace dtrain {

Block::Block(ComputeDevice& dev, const ModelConfig& c, int i, uint32_t unit_id, Arena& arena, int64_t max_rows)
    : dev_(dev), c_(c), id_(unit_id), unit_("blocks." + std::to_string(i)) {
  const std::string p = unit_.name();
  const int64_t d = c.dim, R = max_rows;
  qkv_ = Linear(dev, unit_, p + ".attn.qkv", d, 3 * d, true, Init::zeros);
  out_ = Linear(dev, unit_, p + ".attn.out", d, d, true, Init::zeros);
  ln1_ = LayerNorm(dev, unit_, p + ".norm1", d, c.ln_eps, arena, R);
  fc1_ = Linear(dev, unit_, p + ".ff.fc1", d, c.ff_dim, true, Init::fan_in_uniform);
  fc2_ = Linear(dev, unit_, p + ".ff.fc2", c.ff_dim, d, true, Init::fan_in_uniform);
  ln2_ = LayerNorm(dev, unit_, p + ".norm2", d, c.ln_eps, arena, R);
  ln1_out_ = arena.f32(R * d);
  r1_ = arena.f32(R * d);
  qkv_buf_ = arena.f32(R * 3 * d);
  ctx_ = arena.f32(R * d);
  probs_ = arena.f32(R * c.heads * c.seq_len);
  ln2_out_ = arena.f32(R * d);
  r2_ = arena.f32(R * d);
  ff_saved_ = arena.f32(R * c.ff_dim);
}

void Block::attn_forward(const float* u, float* a_out, const StepContext& ctx) {
  qkv_.forward(u, qkv_buf_, ctx.rows(), ctx.precision);
  AttentionShape s{ctx.B, ctx.T, c_.heads, c_.dim / c_.heads, c_.causal, ctx.precision};
  dev_.attention_forward(qkv_buf_, ctx_, probs_, s, ctx.drop(id_, kDropAttnProbs));
  out_.forward(ctx_, a_out, ctx.rows(), ctx.precision);
}

void Block::attn_backward(const float* u, const float* da, float* du, bool accumulate,
                          const StepContext& ctx, const Workspace& ws) {
  const int64_t rows = ctx.rows();
  out_.backward(ctx_, da, ws.tmp2, rows, false, ctx.precision);
  AttentionShape s{ctx.B, ctx.T, c_.heads, c_.dim / c_.heads, c_.causal, ctx.precision};
  dev_.attention_backward(ws.tmp2, qkv_buf_, probs_, ws.grad_qkv, s, ctx.drop(id_, kDropAttnProbs));
  qkv_.backward(u, ws.grad_qkv, du, rows, accumulate, ctx.precision);
}

// The feed-forward's saved activation: for ReLU, a = drop(relu(fc1(u))) itself, from which both
// fc2's weight gradient and the ReLU+dropout backward follow (nothing recomputed, no mask
// redrawn); for GELU, the pre-activation fc1(u), from which a is recomputed in backward.
const float* Block::ff_activation(const StepContext& ctx, const Workspace& ws) {
  const int64_t n = ctx.rows() * c_.ff_dim;
  const DropoutSpec drop = ctx.drop(id_, kDropFfAct);
  float* a = relu() ? ff_saved_ : ws.ff_act;
  dev_.activation_forward(c_.activation, ff_saved_, a, n);
  dev_.dropout_forward(a, a, ctx.B, ctx.T * c_.ff_dim, drop);
  return a;
}

void Block::ff_forward(const float* u, float* f_out, const StepContext& ctx, const Workspace& ws) {
  fc1_.forward(u, ff_saved_, ctx.rows(), ctx.precision);
  fc2_.forward(ff_activation(ctx, ws), f_out, ctx.rows(), ctx.precision);
}

void Block::ff_backward(const float* u, const float* df, float* du, bool accumulate,
                        const StepContext& ctx, const Workspace& ws) {
  const int64_t rows = ctx.rows(), n = rows * c_.ff_dim;
  const DropoutSpec drop = ctx.drop(id_, kDropFfAct);
  const float* a = relu() ? ff_saved_ : ff_activation(ctx, ws);
  fc2_.backward(a, df, ws.grad_ff, rows, false, ctx.precision);
  if (relu()) {
    dev_.relu_backward_from_output(a, ws.grad_ff, ws.grad_ff, n, drop.active() ? drop.scale() : 1.0f);
  } else {
    dev_.dropout_backward(ws.grad_ff, ws.grad_ff, ctx.B, ctx.T * c_.ff_dim, drop);
    dev_.activation_backward(c_.activation, ff_saved_, ws.grad_ff, ws.grad_ff, n);
  }
  fc1_.backward(u, ws.grad_ff, du, rows, accumulate, ctx.precision);
}

// r = x + drop(a)  (a is overwritten)
static void residual_dropout(ComputeDevice& dev, const float* x, float* a, float* r, const StepContext& ctx,
                             int64_t d, const DropoutSpec& spec) {
  dev.dropout_forward(a, a, ctx.B, ctx.T * d, spec);
  dev.add(x, a, r, ctx.rows() * d);
}

void Block::forward(const float* x, const StepContext& ctx, const Workspace& ws) {
  const int64_t rows = ctx.rows(), d = c_.dim;
  const bool pre = c_.pre_norm;
  if (pre) ln1_.forward(x, ln1_out_, rows);
  attn_forward(pre ? ln1_out_ : x, ws.tmp1, ctx);
  residual_dropout(dev_, x, ws.tmp1, r1_, ctx, d, ctx.drop(id_, kDropAttnOut));
  if (!pre) ln1_.forward(r1_, ln1_out_, rows);
  const float* y1 = pre ? r1_ : ln1_out_;
  if (pre) ln2_.forward(y1, ln2_out_, rows);
  ff_forward(pre ? ln2_out_ : y1, ws.tmp1, ctx, ws);
  residual_dropout(dev_, y1, ws.tmp1, r2_, ctx, d, ctx.drop(id_, kDropFfOut));
  if (!pre) ln2_.forward(r2_, ln2_out_, rows);
}

void Block::backward(const float* x, const float* dout, float* dx, const StepContext& ctx,
                     const Workspace& ws) {
  const int64_t rows = ctx.rows(), d = c_.dim;
  const DropoutSpec drop_ff = ctx.drop(id_, kDropFfOut), drop_attn = ctx.drop(id_, kDropAttnOut);
  if (!c_.pre_norm) {
    ln2_.backward(r2_, dout, ws.tmp2, rows, false);                  // tmp2 = d r2
    dev_.dropout_backward(ws.tmp2, ws.tmp1, ctx.B, ctx.T * d, drop_ff);  // tmp1 = d f
    ff_backward(ln1_out_, ws.tmp1, ws.tmp2, true, ctx, ws);          // tmp2 = d y1
    ln1_.backward(r1_, ws.tmp2, dx, rows, false);                    // dx = d r1
    dev_.dropout_backward(dx, ws.tmp1, ctx.B, ctx.T * d, drop_attn);      // tmp1 = d a
    attn_backward(x, ws.tmp1, dx, true, ctx, ws);                    // dx += d x via attention
  } else {
    dev_.copy(dx, dout, sizeof(float) * rows * d);                 // residual path
    dev_.dropout_backward(dout, ws.tmp1, ctx.B, ctx.T * d, drop_ff);      // tmp1 = d f
    ff_backward(ln2_out_, ws.tmp1, ws.tmp2, false, ctx, ws);         // tmp2 = d ln2_out
    ln2_.backward(r1_, ws.tmp2, dx, rows, true);                     // dx = d r1
    dev_.dropout_backward(dx, ws.tmp1, ctx.B, ctx.T * d, drop_attn);      // tmp1 = d a
    attn_backward(ln1_out_, ws.tmp1, ws.tmp1, false, ctx, ws);       // tmp1 = d ln1_out
    ln1_.backward(x, ws.tmp1, dx, rows, true);                       // dx += d x via norm1
  }
}

}  // namespace dtrain
