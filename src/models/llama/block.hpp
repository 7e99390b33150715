// One Llama decoder block as a unit: pre-norm RMSNorm, grouped-query attention with rotary
// positions, SwiGLU feed-forward, no biases; parameters under Hugging Face's names
// (model.layers.N.self_attn.q_proj.weight, …). q, k and v (and gate and up) are declared side by
// side, so their stacked rows are one matrix and one matmul gives the packed rows the attention
// (SwiGLU) kernel reads. Under tensor parallelism a slice holds whole query and key/value heads and a
// share of the feed-forward width, meeting the other slices through TpRegions. The mixture-of-experts
// kind (model.kind = moe) builds the same block with a MoeLayer for its feed-forward (SparseFeedForward),
// and beside it, as a shared expert, the dense SwiGLU of its own width.
#pragma once
#include <optional>

#include "models/llama/config.hpp"
#include "nn/attention_core.hpp"
#include "nn/moe_layer.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "nn/tp_linear.hpp"
#include "nn/sequence_attention.hpp"
#include "nn/tp_regions.hpp"
#include "nn/weight_grads.hpp"

namespace dtrain {

// A block whose feed-forward is a mixture of experts, and the weight of its balance loss per sample
// (the coefficient over the blocks that have one: their mean is the loss).
// Expert parallel: its experts split over ranks, reached through `exchange` (null: all here).
struct SparseFeedForward {
  MoeSpec spec;
  float balance_weight = 0.0f;
  ExpertExchange* exchange = nullptr;
  int64_t layer = 0, layers = 1;  // its place among the model's mixture-of-experts blocks
  int64_t shared_ff = 0;          // a shared expert's width (the block's dense SwiGLU beside the experts); 0: none
};

class LlamaBlock : public Module {
 public:
  // Block i (model-wide unit i + 1: the key of its dropout masks).
  // sequence: context parallel's attention (null: the device's kernel over whole sequences).
  LlamaBlock(ComputeDevice& dev, const LlamaConfig& c, int i, TpSlice slice = {}, TpRegions& regions = no_tp_regions(),
             SequenceAttention* sequence = nullptr, const SparseFeedForward* sparse = nullptr);
  void plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) override;
  int64_t weight_grad_floats(const StepContext& ctx, bool copy_inputs) const override;
  bool recomputes_selectively() const override { return true; }
  int64_t scratch_floats(const StepContext& ctx) const override;
  int64_t output_floats(const StepContext& ctx) const override { return slice_.local_rows(ctx.rows()) * c_.dim; }
  double train_flops_per_sample() const override;
  void forward(const float* x, const UnitPass& p) override;
  const float* output(int slot) const override { return saved_[size_t(slot)].r2; }
  void backward(const float* x, float* dout, float* dx, const UnitPass& p, BackwardPart part) override;
  void take_expert_load(ExpertLoad& load) override {
    if (moe_) moe_->take_load(load, sparse_layer_, sparse_layers_, balance_weight_);
  }

 private:
  // Scratch of one call (see scratch_floats).
  struct Work {
    float *tmp1, *tmp2, *grad_qkv, *grad_act, *grad_ff, *full1, *full2;
    float *probs, *act;  // recompute = selective only: the attention probabilities, SwiGLU's output
    float* moe;          // a mixture of experts' forward and backward
  };
  Work work(float* scratch, int64_t rows) const;
  int64_t carve(float* scratch, int64_t rows, Work* w) const;
  AttentionShape attention_shape(const StepContext& ctx) const;
  RopeShape rope_shape(const StepContext& ctx) const;
  DropoutSpec drop_probs(const StepContext& ctx) const;
  DropoutSpec drop_rows(const StepContext& ctx, uint32_t site) const {
    return ctx.drop_rows(id_, site, slice_.first_row(ctx.rows()));
  }
  void attn_backward(Operand u, const float* da, float* du, const StepContext& ctx, const Work& w);
  void ff_backward(Operand u, const float* df, float* du, const StepContext& ctx, const Work& w);
  // The running backward call's Linear backward: whole, or (part = input) the weight half kept.
  LinearBackward grads() const { return {part_, store_}; }

  ComputeDevice& dev_;
  LlamaConfig c_;
  uint32_t id_;
  TpSlice slice_;
  TpRegions& regions_;
  SequenceAttention* sequence_;
  int64_t heads_, kv_heads_, ff_;  // this slice's
  Norm norm1_, norm2_;
  Linear qkv_, o_, gate_up_, down_;  // qkv_ and gate_up_: views over adjacent q, k, v (gate, up) parameters
  std::optional<MoeLayer> moe_;      // instead of gate_up_ and down_ (model.kind = moe)
  float balance_weight_ = 0.0f;
  int64_t sparse_layer_ = 0, sparse_layers_ = 0;
  int slot_ = 0;                     // the running backward's
  struct Saved {
    // the norms' outputs, the sublayers' inputs: bf16 where the plan keeps activations so (n2 not
    // under a mixture of experts, whose routing reads it in f32)
    ActBuffer n1, n2;
    float *r1, *r2;
    ActBuffer ff;  // gate and up [rows, 2f] (bf16 where the plan keeps activations so)
    // the attention's qkv (RoPE applied), probabilities and context: bf16 where the plan keeps
    // activations so (f32 under CP, which keeps no probabilities; probs in the scratch under selective)
    ActBuffer qkv, probs, ctx;
    ActBuffer act;  // SwiGLU's output (bf16 where the plan keeps activations so; in the scratch under selective)
    float* attn;  // context parallel: what its attention keeps (probs are then null)
  };
  std::vector<Saved> saved_;
  Saved* s_ = nullptr;
  WeightGradStore* store_ = nullptr;  // split backward: what W needs, of the running backward's micro-batch
  bool selective_ = false;            // probs and act not kept: recomputed in backward
  bool bf16_act_ = false;             // activations in bf16 (KeepPlan::bf16), also in the scratch (selective)
  BackwardPart part_ = BackwardPart::all;
};

}  // namespace dtrain
