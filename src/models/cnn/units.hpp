// The image classifier's units before its loss: ConvUnit (a convolution and its activation, ReLU or
// GELU; after the last one the max pooling and dropout) and DenseUnit (a hidden linear layer, the
// activation and dropout). ReLU's backward reads its output, GELU's its input (kept then). Rows are
// samples; a unit's output is its activation [N, C, H, W] read as N rows, which the next unit takes as
// it is (flattening costs nothing): NCHW after pooling, the device's image layout between convolutions.
// The loss unit is the shared ClassifierHead (no norm, one row per sample).
#pragma once
#include <vector>

#include "models/cnn/config.hpp"
#include "nn/conv_layers.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "nn/weight_grads.hpp"

namespace dtrain {

class ConvUnit : public Module {
 public:
  // Convolution i of the config's (model-wide unit i: the key of its dropout mask). The first reads
  // the batch's pixels.
  ConvUnit(ComputeDevice& dev, const CnnConfig& c, int i);
  void plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) override;
  int64_t weight_grad_floats(const StepContext& ctx, bool copy_inputs) const override;
  int64_t scratch_floats(const StepContext& ctx) const override;
  int64_t output_floats(const StepContext& ctx) const override { return ctx.B * out_floats(); }
  double train_flops_per_sample() const override;
  void forward(const float* x, const UnitPass& p) override;
  const float* output(int slot) const override { return saved_[size_t(slot)].out; }
  void backward(const float* x, float* dy, float* dx, const UnitPass& p, BackwardPart part) override;

 private:
  int64_t out_floats() const { return pooled_ ? pool_.out_floats() : conv_.out_floats(); }  // per sample
  DropoutSpec drop(const StepContext& ctx) const;
  bool input_unit() const { return id_ == 0; }

  ComputeDevice& dev_;
  uint32_t id_;
  bool pooled_;  // the last convolution, when model.pool > 1: pooling follows (dropout follows the last one)
  float dropout_;
  Activation act_;
  Conv2d conv_;
  MaxPool2d pool_;
  struct Saved {
    float* a = nullptr;       // conv(x) [N, K, P, Q], kept when the activation's backward reads it (GELU)
    float* y = nullptr;       // act(conv(x)) [N, K, P, Q]
    float* pooled = nullptr;  // its max pooling
    float* out = nullptr;     // the output: y or the pooled values, after dropout (the last one)
  };
  std::vector<Saved> saved_;
  // The values dropout reads: the pooled ones, or the activation's output without pooling.
  float* before_dropout(const Saved& s) const { return pooled_ ? s.pooled : s.y; }
};

class DenseUnit : public Module {
 public:
  // Hidden linear layer j (named fc{j+1}; model-wide unit `id`) from `in` to `out` features.
  DenseUnit(ComputeDevice& dev, const CnnConfig& c, int j, uint32_t id, int64_t in, int64_t out);
  void plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) override;
  int64_t weight_grad_floats(const StepContext& ctx, bool) const override { return ctx.B * (fc_.in + fc_.out); }
  int64_t output_floats(const StepContext& ctx) const override { return ctx.B * fc_.out; }
  double train_flops_per_sample() const override { return 6.0 * double(fc_.in) * double(fc_.out); }
  void forward(const float* x, const UnitPass& p) override;
  const float* output(int slot) const override { return saved_[size_t(slot)].out; }
  void backward(const float* x, float* dy, float* dx, const UnitPass& p, BackwardPart part) override;

 private:
  DropoutSpec drop(const StepContext& ctx) const;

  ComputeDevice& dev_;
  uint32_t id_;
  float dropout_;
  Activation act_;
  Linear fc_;
  struct Saved {
    float* h = nullptr;    // fc(x) [N, out], kept when the activation's backward reads it (GELU)
    float* out = nullptr;  // dropout(act(fc(x))) [N, out]
  };
  std::vector<Saved> saved_;
};

}  // namespace dtrain
