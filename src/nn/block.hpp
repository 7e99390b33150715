// One Transformer block as a unit: multi-head attention and feed-forward sublayers with residuals,
// post-norm or pre-norm (docs/model.md). Keeps the activations its backward needs.
#pragma once
#include "nn/config.hpp"
#include "nn/context.hpp"
#include "nn/layers.hpp"

namespace dtrain {

class Block {
 public:
  Block(ComputeDevice& dev, const ModelConfig& c, int index, uint32_t unit_id, Arena& arena, int64_t max_rows);
  Unit& unit() { return unit_; }
  // x [rows, d] → output() [rows, d]; x must stay unchanged until backward.
  void forward(const float* x, const StepContext& ctx, const Workspace& ws);
  const float* output() const { return c_.pre_norm ? r2_ : ln2_out_; }
  // dout [rows, d] → dx [rows, d] (distinct buffers); accumulates parameter gradients.
  void backward(const float* x, const float* dout, float* dx, const StepContext& ctx, const Workspace& ws);

 private:
  void ff_forward(const float* u, float* f_out, const StepContext& ctx, const Workspace& ws);
  // From the gradient df of the ff output (after its dropout): parameter grads, du (+)= input grad.
  void ff_backward(const float* u, const float* df, float* du, bool accumulate, const StepContext& ctx,
                   const Workspace& ws);
  const float* ff_activation(const StepContext& ctx, const Workspace& ws);
  bool relu() const { return c_.activation == Activation::relu; }
  void attn_forward(const float* u, float* a_out, const StepContext& ctx);
  void attn_backward(const float* u, const float* da, float* du, bool accumulate, const StepContext& ctx,
                     const Workspace& ws);

  ComputeDevice& dev_;
  ModelConfig c_;
  uint32_t id_;
  Unit unit_;
  Linear qkv_, out_, fc1_, fc2_;
  LayerNorm ln1_, ln2_;
  // saved activations
  float *ln1_out_, *r1_, *qkv_buf_, *ctx_, *probs_, *ln2_out_, *r2_, *ff_saved_;
};

}  // namespace dtrain
