// Transformer block forward and backward (see block.hpp). Post-norm: y = LN(x + drop(f(x)));
// pre-norm: y = x + drop(f(LN(x))). The feed-forward activation is recomputed in backward
// instead of stored (it is the largest activation). Tensor parallel: qkv and fc1 are column
// parallel (their input's rows gathered first under sequence parallel), the attention output and
// fc2 row parallel (their partial sums added up across the slices).
#include "models/transformer/block.hpp"

namespace dtrain {

Block::Block(ComputeDevice& dev, const TransformerConfig& c, int i, TpSlice slice, TpRegions& regions,
             SequenceAttention* sequence)
    : Module("blocks." + std::to_string(i)),
      dev_(dev),
      c_(c),
      id_(uint32_t(i + 1)),
      slice_(slice),
      regions_(regions),
      sequence_(sequence),
      heads_(c.heads / slice.count),
      ff_(c.ff_dim / slice.count) {
  Unit& u = unit();
  const std::string p = u.name();
  const int64_t d = c.dim;
  const bool rows_split = slice.splits_rows();
  qkv_ = Linear(dev, u, p + ".attn.qkv", d, 3 * d, true, Init::zeros, LinearCut::columns, slice, 3);
  out_ = Linear(dev, u, p + ".attn.out", d, d, true, Init::zeros, LinearCut::rows, slice);
  ln1_ = Norm(dev, u, p + ".norm1", d, c.ln_eps, NormKind::layer, rows_split);
  fc1_ = Linear(dev, u, p + ".ff.fc1", d, c.ff_dim, true, Init::fan_in_uniform, LinearCut::columns, slice);
  fc2_ = Linear(dev, u, p + ".ff.fc2", c.ff_dim, d, true, Init::fan_in_uniform, LinearCut::rows, slice);
  ln2_ = Norm(dev, u, p + ".norm2", d, c.ln_eps, NormKind::layer, rows_split);
  if (sequence) sequence->check_heads(heads_, heads_);
}

void Block::plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) {
  const int64_t d = c_.dim, R = largest.rows(), dl = heads_ * (d / c_.heads);
  const int64_t Rn = slice_.local_rows(R);  // rows of the norms and residuals
  ln1_.plan(arena, Rn, keep.slots);
  ln2_.plan(arena, Rn, keep.slots);
  selective_ = keep.selective && !sequence_;  // context parallel keeps no probabilities to recompute
  bf16_ = keep.bf16;
  saved_.assign(size_t(keep.slots), Saved{});
  for (Saved& v : saved_) {
    v.ln1_out = c_.pre_norm ? keep.activation(arena, Rn * d) : ActBuffer(arena.f32(Rn * d));
    v.r1 = arena.f32(Rn * d);
    v.qkv = sequence_ ? ActBuffer(arena.f32(R * 3 * dl)) : keep.activation(arena, R * 3 * dl);
    v.ctx = sequence_ ? ActBuffer(arena.f32(R * dl)) : keep.activation(arena, R * dl);
    v.probs = selective_ || sequence_ ? ActBuffer() : keep.activation(arena, R * heads_ * c_.seq_len);
    if (sequence_) v.attn = arena.f32(sequence_->saved_floats(attention_shape(largest)));
    v.ln2_out = c_.pre_norm ? keep.activation(arena, Rn * d) : ActBuffer(arena.f32(Rn * d));
    v.r2 = arena.f32(Rn * d);
    v.ff = keep.activation(arena, R * ff_);
  }
  s_ = &saved_[0];
}

// Each Linear's output gradient, and its input where no saved activation holds it until W
// (gathered rows under sequence parallel; GELU's recomputed activation; all of them when copied).
int64_t Block::weight_grad_floats(const StepContext& ctx, bool copy_inputs) const {
  const int64_t d = c_.dim, R = ctx.rows(), dl = heads_ * (d / c_.heads);
  return R * (3 * dl + d + ff_ + d) + (copy_inputs || slice_.splits_rows() ? 2 * R * d : 0) +
         (copy_inputs ? R * dl : 0) + (copy_inputs || !relu() ? R * ff_ : 0);
}

int64_t Block::scratch_floats(const StepContext& ctx) const {
  return carve_workspace(c_, slice_, ctx.rows(), nullptr, nullptr, selective_);
}

Workspace Block::workspace(const UnitPass& p) const {
  Workspace ws;
  carve_workspace(c_, slice_, p.ctx.rows(), p.scratch, &ws, selective_);
  return ws;
}

// Per token: 6 FLOPs per matmul parameter (forward, both gradients) and the attention's scores and
// weighted sum (2 matmuls of T × d, forward and backward; the causal mask's halving not claimed).
double Block::train_flops_per_sample() const {
  const double d = double(c_.dim), f = double(c_.ff_dim), T = double(c_.seq_len);
  return T * (6.0 * (4 * d * d + 2 * d * f) + 6.0 * 2.0 * T * d);
}

AttentionShape Block::attention_shape(const StepContext& ctx) const {
  return AttentionShape{ctx.B, ctx.T, heads_, c_.dim / c_.heads, c_.causal, ctx.precision};
}

// The probabilities [B, heads, T, T] of this slice's heads within all heads' (mask keys are global).
DropoutSpec Block::drop_probs(const StepContext& ctx) const {
  DropoutSpec s = ctx.drop(id_, kDropAttnProbs);
  const int64_t per_head = ctx.seq_len() * ctx.seq_len();
  s.global_cols = c_.heads * per_head;
  s.col_offset = slice_.index * heads_ * per_head;
  return s;
}

float* Block::attn_forward(Operand u, const StepContext& ctx, const Workspace& ws) {
  const int64_t rows = ctx.rows();
  write_activation(dev_, s_->qkv, ws.grad_qkv, rows * 3 * heads_ * (c_.dim / c_.heads), [&](float* out) {
    column_parallel_forward(regions_, qkv_, u, ws.full2, out, rows, ctx.precision);
  });  // (grad_qkv: staging, when kept in bf16)
  attention_context(dev_, sequence_, s_->qkv, s_->ctx, s_->probs, s_->attn, attention_shape(ctx), drop_probs(ctx),
                    ctx.sequence, ws.tmp2);  // (tmp2: staging, when kept in bf16)
  return row_parallel_forward(regions_, out_, s_->ctx, ws.tmp1, ws.tmp2, rows, ctx.precision);
}

void Block::attn_backward(Operand u, const float* da, float* du, bool accumulate,
                          const StepContext& ctx, const Workspace& ws) {
  const int64_t rows = ctx.rows();
  const float* da_all = regions_.all_rows(da, ws.full1, rows, c_.dim);
  grads()(out_, s_->ctx, true, da_all, ws.tmp2, rows, false, ctx.precision);
  if (sequence_) {
    sequence_->backward(ws.tmp2, s_->qkv.f32(), s_->ctx.f32(), s_->attn, ws.grad_qkv, attention_shape(ctx), drop_probs(ctx),
                        ctx.sequence);
  } else {
    if (selective_) {  // the probabilities again, from the q and k kept
      s_->probs = probs_scratch(ws);
      dev_.attention_forward(s_->qkv, nullptr, s_->probs, attention_shape(ctx), drop_probs(ctx));
    }
    dev_.attention_backward(ws.tmp2, s_->qkv, s_->probs, ws.grad_qkv, attention_shape(ctx), drop_probs(ctx));
  }
  // (da_all and the context's gradient in tmp2 are spent)
  column_parallel_backward(regions_, slice_, grads(), qkv_, u, ws.full1, ws.grad_qkv, ws.full2, ws.tmp2, du, accumulate,
                           rows, ctx.precision);
}

// The feed-forward activation of this slice's columns [rows, ff_] within all ff_dim columns.
static DropoutSpec drop_ff(const StepContext& ctx, uint32_t unit, int64_t ff_all, int64_t ff, int slice) {
  DropoutSpec s = ctx.drop_rows(unit, kDropFfAct, 0);
  s.global_cols = ff_all;
  s.col_offset = int64_t(slice) * ff;
  return s;
}

// The feed-forward's activation a = drop(act(fc1(u))). Saved for ReLU: a itself (its values rounded
// to bf16 where the plan keeps activations so), from which both fc2's weight gradient and the
// ReLU+dropout backward follow (nothing recomputed, no mask redrawn); ReLU(fc1(u)), which fc1's
// product computes in its pass, in relu_input(). For GELU the pre-activation fc1(u) is saved (in
// bf16 where the plan keeps activations so: GELU then reads it rounded, in forward as in backward),
// and a, in the workspace (in bf16 where the plan keeps activations so, GELU's f32 output staged in
// grad_ff, free until fc2's backward writes it), recomputed in backward.
Operand Block::ff_activation(const StepContext& ctx, const Workspace& ws) {
  const DropoutSpec drop = drop_ff(ctx, id_, c_.ff_dim, ff_, slice_.index);
  if (relu()) {
    dev_.dropout_forward(relu_input(ws), s_->ff, ctx.rows(), ff_, drop);
    return s_->ff;
  }
  float* act = bf16_ ? ws.grad_ff : ws.ff_act;  // act(fc1(u)) in f32
  const ActBuffer a = ActBuffer::of(ws.ff_act, bf16_);
  dev_.activation_forward(c_.activation, s_->ff, act, ctx.rows() * ff_);
  dev_.dropout_forward(act, a, ctx.rows(), ff_, drop);
  return a;
}

float* Block::ff_forward(Operand u, const StepContext& ctx, const Workspace& ws) {
  const int64_t rows = ctx.rows();
  if (relu())
    column_parallel_forward(regions_, fc1_, u, ws.full2, relu_input(ws), rows, ctx.precision, true);
  else  // (grad_ff: staging, when kept in bf16)
    write_activation(dev_, s_->ff, ws.grad_ff, rows * ff_,
                     [&](float* out) { column_parallel_forward(regions_, fc1_, u, ws.full2, out, rows, ctx.precision); });
  return row_parallel_forward(regions_, fc2_, ff_activation(ctx, ws), ws.tmp1, ws.tmp2, rows, ctx.precision);
}

void Block::ff_backward(Operand u, const float* df, float* du, bool accumulate,
                        const StepContext& ctx, const Workspace& ws) {
  const int64_t rows = ctx.rows(), n = rows * ff_;
  const DropoutSpec drop = drop_ff(ctx, id_, c_.ff_dim, ff_, slice_.index);
  const Operand a = relu() ? Operand(s_->ff) : ff_activation(ctx, ws);
  grads()(fc2_, a, relu(), regions_.all_rows(df, ws.full1, rows, c_.dim), ws.grad_ff, rows, false, ctx.precision);
  // fc1's output gradient, which only its products and bias sum read: in bf16 where activations are
  // kept so, into ff_act (a, the GELU's there, is spent), else in place
  const ActBuffer dh = bf16_ ? ActBuffer(reinterpret_cast<uint16_t*>(ws.ff_act)) : ActBuffer(ws.grad_ff);
  if (relu()) {
    dev_.relu_backward_from_output(a, ws.grad_ff, dh, n, drop.active() ? drop.scale() : 1.0f);
  } else {
    dev_.dropout_backward(ws.grad_ff, ws.grad_ff, rows, ff_, drop);
    dev_.activation_backward(c_.activation, s_->ff, ws.grad_ff, dh, n);
  }
  // (df, in tmp1, and its gathered rows are spent)
  column_parallel_backward(regions_, slice_, grads(), fc1_, u, ws.full1, dh, ws.full2, ws.tmp1, du, accumulate, rows,
                           ctx.precision);
}

// r = x + drop(a)  (a is overwritten); rows: this slice's
static void residual_dropout(ComputeDevice& dev, const float* x, float* a, float* r, int64_t rows, int64_t d,
                             const DropoutSpec& spec) {
  dev.dropout_forward(a, a, rows, d, spec);
  dev.add(x, a, r, rows * d);
}

void Block::forward(const float* x, const UnitPass& p) {
  const StepContext& ctx = p.ctx;
  const Workspace ws = workspace(p);
  const int slot = p.slot;
  s_ = &saved_[size_t(slot)];
  slot_ = slot;
  const int64_t rows = ctx.rows(), n = slice_.local_rows(rows), d = c_.dim;
  const bool pre = c_.pre_norm;
  if (selective_) s_->probs = probs_scratch(ws);  // for this call only
  if (pre) ln1_.forward(x, s_->ln1_out, n, slot_, ws.tmp1);  // (tmp1: staging, when kept in bf16)
  s_->u1 = pre ? Operand(s_->ln1_out) : Operand(x);
  residual_dropout(dev_, x, attn_forward(s_->u1, ctx, ws), s_->r1, n, d, drop_rows(ctx, kDropAttnOut));
  if (!pre) ln1_.forward(s_->r1, s_->ln1_out, n, slot_);
  const float* y1 = pre ? s_->r1 : s_->ln1_out.f32();
  if (pre) ln2_.forward(y1, s_->ln2_out, n, slot_, ws.tmp1);
  s_->u2 = pre ? Operand(s_->ln2_out) : Operand(y1);
  residual_dropout(dev_, y1, ff_forward(s_->u2, ctx, ws), s_->r2, n, d, drop_rows(ctx, kDropFfOut));
  if (!pre) ln2_.forward(s_->r2, s_->ln2_out, n, slot_);
}

void Block::backward(const float* x, float* dout, float* dx, const UnitPass& p, BackwardPart part) {
  const StepContext& ctx = p.ctx;
  const int slot = p.slot;
  s_ = &saved_[size_t(slot)];
  slot_ = slot;
  part_ = part;
  store_ = p.weight_grads;
  DT_ASSERT(part == BackwardPart::all || store_);
  if (part == BackwardPart::weight) {
    store_->run();
    return;
  }
  DT_ASSERT(!store_ || store_->empty());  // a split backward's W ran before this slot was reused
  const Workspace ws = workspace(p);
  const int64_t n = slice_.local_rows(ctx.rows()), d = c_.dim;
  const DropoutSpec drop_ff_out = drop_rows(ctx, kDropFfOut), drop_attn = drop_rows(ctx, kDropAttnOut);
  if (!c_.pre_norm) {
    ln2_.backward(s_->r2, dout, ws.tmp2, n, false, slot_);                 // tmp2 = d r2
    dev_.dropout_backward(ws.tmp2, ws.tmp1, n, d, drop_ff_out);  // tmp1 = d f
    ff_backward(s_->u2, ws.tmp1, ws.tmp2, true, ctx, ws);           // tmp2 = d y1
    ln1_.backward(s_->r1, ws.tmp2, dx, n, false, slot_);                   // dx = d r1
    dev_.dropout_backward(dx, ws.tmp1, n, d, drop_attn);         // tmp1 = d a
    attn_backward(s_->u1, ws.tmp1, dx, true, ctx, ws);              // dx += d x via attention
  } else {
    dev_.copy(dx, dout, sizeof(float) * n * d);                  // residual path
    dev_.dropout_backward(dout, ws.tmp1, n, d, drop_ff_out);     // tmp1 = d f
    ff_backward(s_->u2, ws.tmp1, ws.tmp2, false, ctx, ws);          // tmp2 = d ln2_out
    ln2_.backward(s_->r1, ws.tmp2, dx, n, true, slot_);                    // dx = d r1
    dev_.dropout_backward(dx, ws.tmp1, n, d, drop_attn);         // tmp1 = d a
    attn_backward(s_->u1, ws.tmp1, ws.tmp1, false, ctx, ws);        // tmp1 = d ln1_out
    ln1_.backward(x, ws.tmp1, dx, n, true, slot_);                      // dx += d x via norm1
  }
}

}  // namespace dtrain
