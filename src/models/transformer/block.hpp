// One Transformer block as a unit: multi-head attention and feed-forward sublayers with residuals,
// post-norm or pre-norm (docs/model.md). Keeps the activations its backward needs (under selective
// recompute all but the attention probabilities, recomputed in backward from q and k). Under tensor
// parallelism it holds a slice (whole heads; a share of the feed-forward width) and meets the other
// slices through TpRegions at the edges of its cut matmuls (Megatron's f and g).
#pragma once
#include "models/transformer/config.hpp"
#include "models/transformer/workspace.hpp"
#include "nn/attention_core.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "nn/tp_linear.hpp"
#include "nn/sequence_attention.hpp"
#include "nn/tp_regions.hpp"
#include "nn/weight_grads.hpp"

namespace dtrain {

class Block : public Module {
 public:
  // Block i (model-wide unit i + 1: the key of its dropout masks).
  // sequence: context parallel's attention (null: the device's kernel over whole sequences).
  Block(ComputeDevice& dev, const TransformerConfig& c, int i, TpSlice slice = {}, TpRegions& regions = no_tp_regions(),
        SequenceAttention* sequence = nullptr);
  // keep.slots: micro-batches in flight, each with its own saved activations (pipeline schedules).
  void plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) override;
  int64_t weight_grad_floats(const StepContext& ctx, bool copy_inputs) const override;
  bool recomputes_selectively() const override { return true; }
  int64_t scratch_floats(const StepContext& ctx) const override;
  int64_t output_floats(const StepContext& ctx) const override { return slice_.local_rows(ctx.rows()) * c_.dim; }
  double train_flops_per_sample() const override;
  // x [rows, d] → output(slot) [rows, d]; x must stay unchanged until the slot's backward is done.
  // Under sequence parallel, rows are this slice's share of ctx.rows().
  void forward(const float* x, const UnitPass& p) override;
  const float* output(int slot) const override { return c_.pre_norm ? saved_[slot].r2 : saved_[slot].ln2_out.f32(); }
  // dout [rows, d] → dx [rows, d] (distinct buffers); accumulates parameter gradients. part = input
  // computes dx (and the norms' gradients) and keeps what part = weight, later, needs for the
  // Linear layers' weight gradients (x, dout and dx are then unused).
  void backward(const float* x, float* dout, float* dx, const UnitPass& p, BackwardPart part) override;

 private:
  Workspace workspace(const UnitPass& p) const;
  // The feed-forward of u (this slice's rows) summed over the slices (tmp1, or tmp2 under sequence
  // parallel: this slice's rows).
  float* ff_forward(Operand u, const StepContext& ctx, const Workspace& ws);
  // From the gradient df of the ff output (this slice's rows; u: its input, this slice's rows):
  // parameter grads; du (+)= the input's gradient (this slice's rows).
  void ff_backward(Operand u, const float* df, float* du, bool accumulate, const StepContext& ctx,
                   const Workspace& ws);
  Operand ff_activation(const StepContext& ctx, const Workspace& ws);
  // ReLU: where fc1 writes its output, the activation's own buffer, or the workspace when that is kept in bf16.
  float* relu_input(const Workspace& ws) const { return s_->ff.bf16 ? ws.ff_act : s_->ff.f32(); }
  bool relu() const { return c_.activation == Activation::relu; }
  float* attn_forward(Operand u, const StepContext& ctx, const Workspace& ws);  // as ff_forward
  void attn_backward(Operand u, const float* da, float* du, bool accumulate, const StepContext& ctx,
                     const Workspace& ws);
  DropoutSpec drop_rows(const StepContext& ctx, uint32_t site) const {
    return ctx.drop_rows(id_, site, slice_.first_row(ctx.rows()));
  }
  AttentionShape attention_shape(const StepContext& ctx) const;
  // Under selective recompute: the probabilities of one call, in the type they would be kept in.
  ActBuffer probs_scratch(const Workspace& ws) const { return ActBuffer::of(ws.probs, bf16_); }
  DropoutSpec drop_probs(const StepContext& ctx) const;
  // The running backward call's Linear backward: whole, or (part = input) the weight half kept.
  LinearBackward grads() const { return {part_, store_}; }

  ComputeDevice& dev_;
  TransformerConfig c_;
  uint32_t id_;
  TpSlice slice_;
  TpRegions& regions_;
  SequenceAttention* sequence_;
  int64_t heads_, ff_;  // this slice's heads and feed-forward width
  Linear qkv_, out_, fc1_, fc2_;
  Norm ln1_, ln2_;
  // What one micro-batch's backward needs.
  struct Saved {
    // the norms' outputs: pre-norm, the sublayers' inputs (bf16 where the plan keeps activations
    // so); post-norm, the block's residual stream (f32)
    ActBuffer ln1_out, ln2_out;
    float *r1, *r2;
    // The attention's qkv, probabilities and context (bf16 where the plan keeps activations so; f32
    // under CP; probs in the scratch under selective recompute, none under CP)
    ActBuffer qkv, probs, ctx;
    ActBuffer ff;  // ReLU: its activation; GELU: fc1's output (either in bf16 where the plan keeps activations so)
    float* attn = nullptr;  // context parallel: what its attention keeps (probs are then null)
    // The attention's and feed-forward's inputs (this slice's rows): sequence parallel gathers them
    // again in backward rather than keeping all rows of them (Megatron's choice).
    Operand u1, u2;
  };
  std::vector<Saved> saved_;  // one per slot
  Saved* s_ = nullptr;        // the slot of the running forward or backward
  WeightGradStore* store_ = nullptr;  // split backward: what W needs, of the running backward's micro-batch
  bool selective_ = false;            // probs: not kept, in the scratch for one call (recompute = selective)
  bool bf16_ = false;                 // activations kept in bf16 (KeepPlan::bf16)
  int slot_ = 0;
  BackwardPart part_ = BackwardPart::all;
};

}  // namespace dtrain
