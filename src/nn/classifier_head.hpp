// The loss unit of every classifier: the final norm, the classifier over the classes (a language
// model's vocabulary, an image model's classes) and the cross-entropy loss, fused (the classifier's
// gradients are computed in forward when a backward follows); an image classifier's has no norm and
// one row per sample. A tied head reads the embedding's table through an explicit shared parameter.
// Under tensor parallelism it holds a slice of the classes and combines the slices' row statistics
// through TpRegions, never the logits.
#pragma once
#include <vector>

#include "kernels/types.hpp"
#include "nn/embed_head_shape.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "nn/tp_regions.hpp"

namespace dtrain {

class ClassifierHead : public Module {
 public:
  // tied: the embedding's table (its unit is read by this one), or null for a classifier of its own.
  ClassifierHead(ComputeDevice& dev, const EmbedHeadShape& c, const ParamRef* tied, TpSlice slice = {},
         TpRegions& regions = no_tp_regions());

  void plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) override;
  int64_t scratch_floats(const StepContext& ctx) const override;
  int64_t output_floats(const StepContext&) const override { return 0; }
  double train_flops_per_sample() const override;
  void forward(const float* x, const UnitPass& p) override;
  const float* output(int) const override { return nullptr; }
  void backward(const float* x, float* dy, float* dx, const UnitPass& p, BackwardPart part) override;
  void predict(const float* x, const UnitPass& p, float* out) override;
  int64_t outputs() const override { return c_.vocab_size; }

 private:
  // The classifier's weight as its products (with f32 hidden states) read it (weight_operand).
  Operand weight(Precision p) const { return weight_operand(dev_, tied_.unit ? tied_ : w_, Operand{}, p); }
  float* weight_grad() const { return tied_.unit ? tied_.grad() : w_.grad(); }
  VocabRange vocab_range() const;
  bool has_norm() const { return c_.final_norm != EmbedHeadShape::FinalNorm::none; }
  // The final norm of x (this slice's rows) into hf_; x itself without one.
  const float* normed(const float* x, const UnitPass& p);
  // The classifier and loss over all rows of h (this slice's rows), the vocabulary slices' row
  // statistics combined; in training dx gets h's gradient.
  ClassifierArgs classifier_args(const float* h, const UnitPass& p) const;

  ComputeDevice& dev_;
  EmbedHeadShape c_;
  TpSlice slice_;
  TpRegions& regions_;
  Norm norm_f_;
  ParamRef tied_, w_, b_;
  float* hf_ = nullptr;       // final norm output [rows, d]
  std::vector<float*> dhf_;   // per slot: its gradient [rows, d], computed in forward
};

}  // namespace dtrain
