// LlamaBlock forward and backward (see block.hpp): h = x + drop(o(attn(rope(qkv(norm1(x)))))),
// y = h + drop(down(swiglu(gate_up(norm2(h))))). Tensor parallel like the Transformer's block: qkv
// and gate_up column parallel (their input's rows gathered first under sequence parallel), o and
// down row parallel (their partial sums added up across the slices).
#include "models/llama/block.hpp"

namespace dtrain {

namespace {

enum Site : uint32_t { kAttnProbs = 1, kAttnOut = 2, kFfOut = 4 };  // dropout sites (the Transformer's numbers)

int64_t aligned(int64_t floats) { return (floats + 15) / 16 * 16; }  // 64 bytes, as the arena hands out

// A Linear over `n` adjacent parameters of a unit, the first `first`: their stacked rows [out, in].
Linear stacked(ComputeDevice& dev, const ParamRef& first, const std::vector<ParamRef>& rest, int64_t in) {
  Linear l;
  l.dev = &dev;
  l.w = first;
  l.in = in;
  l.out = first.info().shape[0];
  int64_t end = first.info().offset + first.info().numel();
  for (const ParamRef& p : rest) {
    DT_ASSERT(p.info().offset == end && "stacked parameters must be adjacent in the unit");
    end += p.info().numel();
    l.out += p.info().shape[0];
  }
  l.has_bias = false;
  return l;
}

}  // namespace

LlamaBlock::LlamaBlock(ComputeDevice& dev, const LlamaConfig& c, int i, TpSlice slice, TpRegions& regions,
                       SequenceAttention* sequence, const SparseFeedForward* sparse)
    : Module("model.layers." + std::to_string(i)),
      dev_(dev),
      c_(c),
      id_(uint32_t(i + 1)),
      slice_(slice),
      regions_(regions),
      sequence_(sequence),
      heads_(c.heads / slice.count),
      kv_heads_(c.kv() / slice.count),
      ff_((sparse ? sparse->shared_ff : c.ff()) / slice.count) {
  Unit& u = unit();
  const std::string p = u.name() + ".";
  const int64_t d = c.dim, hd = c.head_dim(), f = sparse ? sparse->shared_ff : c.ff();
  const bool rows_split = slice.splits_rows();
  const TpSplit rows{0, 1};  // column parallel: a slice of the output rows
  norm1_ = Norm(dev, u, p + "input_layernorm", d, c.norm_eps, NormKind::rms, rows_split);
  const ParamRef q = u.add(p + "self_attn.q_proj.weight", {c.heads * hd, d}, Init::xavier, 0, rows, slice);
  const ParamRef k = u.add(p + "self_attn.k_proj.weight", {c.kv() * hd, d}, Init::xavier, 0, rows, slice);
  const ParamRef v = u.add(p + "self_attn.v_proj.weight", {c.kv() * hd, d}, Init::xavier, 0, rows, slice);
  qkv_ = stacked(dev, q, {k, v}, d);
  o_ = Linear(dev, u, p + "self_attn.o_proj", c.heads * hd, d, false, Init::zeros, LinearCut::rows, slice);
  norm2_ = Norm(dev, u, p + "post_attention_layernorm", d, c.norm_eps, NormKind::rms, rows_split);
  if (sparse) {
    moe_.emplace(dev, u, add_expert_unit(), p + "mlp.", sparse->spec, sparse->exchange, slice, sequence);
    balance_weight_ = sparse->balance_weight;
    sparse_layer_ = sparse->layer;
    sparse_layers_ = sparse->layers;
  }
  if (f > 0) {  // the dense feed-forward, or the shared expert beside the routed ones
    const std::string m = p + (sparse ? "mlp.shared_experts." : "mlp.");
    const ParamRef gate = u.add(m + "gate_proj.weight", {f, d}, Init::xavier, 0, rows, slice);
    const ParamRef up = u.add(m + "up_proj.weight", {f, d}, Init::xavier, 0, rows, slice);
    gate_up_ = stacked(dev, gate, {up}, d);
    down_ = Linear(dev, u, m + "down_proj", f, d, false, Init::zeros, LinearCut::rows, slice);
  }
  if (sequence) sequence->check_heads(heads_, kv_heads_);
}

int64_t LlamaBlock::carve(float* scratch, int64_t rows, Work* w) const {
  const int64_t d = c_.dim, qkv = (heads_ + 2 * kv_heads_) * c_.head_dim();
  const bool cut = slice_.count > 1;
  int64_t at = 0;
  auto take = [&](int64_t n) -> float* {
    float* p = scratch ? scratch + at : nullptr;
    at += aligned(n);
    return p;
  };
  Work x{take(rows * d),
         take(rows * d),
         take(rows * qkv),
         take(rows * ff_),
         take(rows * 2 * ff_),
         cut ? take(rows * d) : nullptr,
         cut ? take(rows * d) : nullptr,
         selective_ && !sequence_ ? take(rows * heads_ * c_.seq_len) : nullptr,
         selective_ ? take(rows * ff_) : nullptr,
         moe_ ? take(moe_->scratch_floats(rows)) : nullptr};
  if (w) *w = x;
  return at;
}

int64_t LlamaBlock::scratch_floats(const StepContext& ctx) const { return carve(nullptr, ctx.rows(), nullptr); }

LlamaBlock::Work LlamaBlock::work(float* scratch, int64_t rows) const {
  Work w;
  carve(scratch, rows, &w);
  return w;
}

void LlamaBlock::plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) {
  const int64_t d = c_.dim, R = largest.rows(), Rn = slice_.local_rows(R), hd = c_.head_dim();
  const int64_t qkv = (heads_ + 2 * kv_heads_) * hd;
  norm1_.plan(arena, Rn, keep.slots);
  norm2_.plan(arena, Rn, keep.slots);
  selective_ = keep.selective;
  bf16_act_ = keep.bf16;
  saved_.assign(size_t(keep.slots), Saved{});
  for (Saved& s : saved_) {
    s.n1 = keep.activation(arena, Rn * d);
    s.r1 = arena.f32(Rn * d);
    s.qkv = sequence_ ? ActBuffer(arena.f32(R * qkv)) : keep.activation(arena, R * qkv);
    s.ctx = sequence_ ? ActBuffer(arena.f32(R * heads_ * hd)) : keep.activation(arena, R * heads_ * hd);
    s.probs = selective_ || sequence_ ? ActBuffer() : keep.activation(arena, R * heads_ * c_.seq_len);
    s.attn = sequence_ ? arena.f32(sequence_->saved_floats(attention_shape(largest))) : nullptr;
    s.n2 = moe_ ? ActBuffer(arena.f32(Rn * d)) : keep.activation(arena, Rn * d);
    s.r2 = arena.f32(Rn * d);
    s.ff = keep.activation(arena, R * 2 * ff_);
    s.act = selective_ ? ActBuffer() : keep.activation(arena, R * ff_);
  }
  if (moe_) moe_->plan(arena, Rn, keep.slots, keep.bf16);
  s_ = &saved_[0];
}

// Each Linear's output gradient, and its input where no saved activation holds it until W
// (gathered rows under sequence parallel; SwiGLU's output recomputed under selective; all when copied).
int64_t LlamaBlock::weight_grad_floats(const StepContext& ctx, bool copy_inputs) const {
  const int64_t d = c_.dim, R = ctx.rows(), qkv = (heads_ + 2 * kv_heads_) * c_.head_dim();
  return R * (qkv + d + 2 * ff_ + d) + (copy_inputs || slice_.splits_rows() ? 2 * R * d : 0) +
         (copy_inputs ? R * heads_ * c_.head_dim() : 0) + (copy_inputs || selective_ ? R * ff_ : 0);
}

// Per token: 6 FLOPs per matmul parameter (forward, both gradients) and the attention's scores and
// weighted sum (forward and backward; the causal mask's halving not claimed).
double LlamaBlock::train_flops_per_sample() const {
  const double d = double(c_.dim), f = double(c_.ff()), T = double(c_.seq_len), hd = double(c_.head_dim());
  const double matmul = d * (double(c_.heads) + 2.0 * double(c_.kv())) * hd + double(c_.heads) * hd * d +
                        3.0 * d * (moe_ ? double(ff_ * slice_.count) : f);
  return T * (6.0 * matmul + 6.0 * 2.0 * T * double(c_.heads) * hd + (moe_ ? moe_->train_flops_per_token() : 0.0));
}

AttentionShape LlamaBlock::attention_shape(const StepContext& ctx) const {
  AttentionShape s{ctx.B, ctx.T, heads_, c_.head_dim(), c_.causal, ctx.precision};
  s.kv_heads = kv_heads_;
  return s;
}

RopeShape LlamaBlock::rope_shape(const StepContext& ctx) const {
  RopeShape s;
  s.B = ctx.B;
  s.T = ctx.T;
  s.heads = heads_;
  s.kv_heads = kv_heads_;
  s.head_dim = c_.head_dim();
  s.theta = c_.rope_theta;
  s.sequence = ctx.sequence;
  return s;
}

// The probabilities [B, heads, T, T] of this slice's heads within all heads' (mask keys are global).
DropoutSpec LlamaBlock::drop_probs(const StepContext& ctx) const {
  DropoutSpec s = ctx.drop(id_, kAttnProbs);
  const int64_t per_head = ctx.seq_len() * ctx.seq_len();
  s.global_cols = c_.heads * per_head;
  s.col_offset = slice_.index * heads_ * per_head;
  return s;
}

void LlamaBlock::forward(const float* x, const UnitPass& p) {
  const StepContext& ctx = p.ctx;
  const Work w = work(p.scratch, ctx.rows());
  s_ = &saved_[size_t(p.slot)];
  if (selective_) {  // for this call only
    s_->probs = ActBuffer::of(w.probs, bf16_act_);
    s_->act = ActBuffer::of(w.act, bf16_act_);
  }
  const int64_t rows = ctx.rows(), n = slice_.local_rows(rows), d = c_.dim;
  norm1_.forward(x, s_->n1, n, p.slot, w.tmp1);  // (tmp1: staging, when kept in bf16)
  write_activation(dev_, s_->qkv, w.grad_qkv, rows * (heads_ + 2 * kv_heads_) * c_.head_dim(), [&](float* out) {
    column_parallel_forward(regions_, qkv_, s_->n1, w.full2, out, rows, ctx.precision);
    dev_.rope_forward(out, rope_shape(ctx));
  });  // (grad_qkv: staging, when kept in bf16)
  attention_context(dev_, sequence_, s_->qkv, s_->ctx, s_->probs, s_->attn, attention_shape(ctx), drop_probs(ctx),
                    ctx.sequence, w.tmp2);  // (tmp2: staging, when kept in bf16)
  float* a = row_parallel_forward(regions_, o_, s_->ctx, w.tmp1, w.tmp2, rows, ctx.precision);
  dev_.dropout_forward(a, a, n, d, drop_rows(ctx, kAttnOut));
  dev_.add(x, a, s_->r1, n * d);
  norm2_.forward(s_->r1, s_->n2, n, p.slot, w.tmp1);
  float* f = w.tmp1;
  if (ff_ > 0) {  // the dense feed-forward, or a mixture of experts' shared expert
    write_activation(dev_, s_->ff, w.grad_ff, rows * 2 * ff_, [&](float* out) {
      column_parallel_forward(regions_, gate_up_, s_->n2, w.full2, out, rows, ctx.precision);
    });  // (grad_ff: staging, when kept in bf16)
    dev_.swiglu_forward(s_->ff, s_->act, rows, ff_);
    f = row_parallel_forward(regions_, down_, s_->act, w.tmp1, w.tmp2, rows, ctx.precision);
  }
  if (moe_) {  // the routed experts' output, added to the shared expert's
    float* routed = ff_ > 0 && f == w.tmp1 ? w.tmp2 : w.tmp1;
    moe_->forward(s_->n2.f32(), routed, rows, ctx.T, ctx.sequence, p.slot, w.moe, ctx.precision);
    routed = regions_.sum_partials(routed, routed, rows, d);  // the slices' shares of the experts' widths
    if (ff_ > 0)
      dev_.add(f, routed, f, n * d);
    else
      f = routed;
  }
  dev_.dropout_forward(f, f, n, d, drop_rows(ctx, kFfOut));
  dev_.add(s_->r1, f, s_->r2, n * d);
}

void LlamaBlock::attn_backward(Operand u, const float* da, float* du, const StepContext& ctx, const Work& w) {
  const int64_t rows = ctx.rows();
  const float* da_all = regions_.all_rows(da, w.full1, rows, c_.dim);
  grads()(o_, s_->ctx, true, da_all, w.tmp2, rows, false, ctx.precision);
  if (sequence_) {
    sequence_->backward(w.tmp2, s_->qkv.f32(), s_->ctx.f32(), s_->attn, w.grad_qkv, attention_shape(ctx), drop_probs(ctx),
                        ctx.sequence);
  } else {
    if (selective_) {  // the probabilities again, from the q and k kept (RoPE applied)
      s_->probs = ActBuffer::of(w.probs, bf16_act_);
      dev_.attention_forward(s_->qkv, nullptr, s_->probs, attention_shape(ctx), drop_probs(ctx));
    }
    dev_.attention_backward(w.tmp2, s_->qkv, s_->probs, w.grad_qkv, attention_shape(ctx), drop_probs(ctx));
  }
  dev_.rope_backward(w.grad_qkv, rope_shape(ctx));
  // (da_all and the context's gradient in tmp2 are spent)
  column_parallel_backward(regions_, slice_, grads(), qkv_, u, w.full1, w.grad_qkv, w.full2, w.tmp2, du, false, rows,
                           ctx.precision);
}

void LlamaBlock::ff_backward(Operand u, const float* df, float* du, const StepContext& ctx, const Work& w) {
  const int64_t rows = ctx.rows();
  if (moe_) {  // its weight gradients now, also in a split backward's input half
    // the balance loss weighs per whole sample what its rows weigh together (context parallel: every
    // share computes the whole sample's gradient for its rows, and the shares' gradients are averaged)
    const float aux_scale = balance_weight_ * ctx.loss_scale * float(ctx.sequence.global_length(ctx.T));
    moe_->backward(u.f32(), df, du, rows, aux_scale, slot_, w.moe, ctx.precision,
                   ctx.loss_scale > 0.0f);  // (a data-parallel filler batch weighs nothing)
    regions_.sum_partials(du, du, rows, c_.dim);  // the slices' shares (no rows split: in place)
    if (ff_ == 0) return;  // no shared expert, whose input gradient adds to the experts'
  }
  if (selective_) {  // SwiGLU's output again, from gate and up kept
    s_->act = ActBuffer::of(w.act, bf16_act_);
    dev_.swiglu_forward(s_->ff, s_->act, rows, ff_);
  }
  grads()(down_, s_->act, !selective_, regions_.all_rows(df, w.full1, rows, c_.dim), w.grad_act, rows, false,
          ctx.precision);
  const ActBuffer dff = ActBuffer::of(w.grad_ff, bf16_act_);  // only gate_up's products read it: bf16 with activations
  dev_.swiglu_backward(s_->ff, w.grad_act, dff, rows, ff_);
  // (df, in tmp1, and its gathered rows are spent)
  column_parallel_backward(regions_, slice_, grads(), gate_up_, u, w.full1, dff, w.full2, w.tmp1, du, moe_.has_value(),
                           rows, ctx.precision);
}

void LlamaBlock::backward(const float* x, float* dout, float* dx, const UnitPass& p, BackwardPart part) {
  s_ = &saved_[size_t(p.slot)];
  slot_ = p.slot;
  part_ = part;
  store_ = p.weight_grads;
  DT_ASSERT(part == BackwardPart::all || store_);
  if (part == BackwardPart::weight) {
    store_->run();
    return;
  }
  DT_ASSERT(!store_ || store_->empty());  // a split backward's W ran before this slot was reused
  const StepContext& ctx = p.ctx;
  const Work w = work(p.scratch, ctx.rows());
  const int64_t n = slice_.local_rows(ctx.rows()), d = c_.dim;
  dev_.copy(dx, dout, sizeof(float) * size_t(n * d));                // the residual path: d r1 = dout + …
  dev_.dropout_backward(dout, w.tmp1, n, d, drop_rows(ctx, kFfOut));  // tmp1 = d (down's output)
  ff_backward(s_->n2, w.tmp1, w.tmp2, ctx, w);                        // tmp2 = d n2
  norm2_.backward(s_->r1, w.tmp2, dx, n, true, p.slot);               // dx = d r1
  dev_.dropout_backward(dx, w.tmp1, n, d, drop_rows(ctx, kAttnOut));  // tmp1 = d (o's output)
  attn_backward(s_->n1, w.tmp1, w.tmp1, ctx, w);                      // tmp1 = d n1
  norm1_.backward(x, w.tmp1, dx, n, true, p.slot);                    // dx += d x via norm1
}

}  // namespace dtrain
