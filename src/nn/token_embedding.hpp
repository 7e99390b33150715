// A language model's input unit: token embedding plus positions (fixed sinusoids, learned, or none
// when the blocks rotate them in, as RoPE does), then dropout. Under tensor parallelism it holds a
// slice of the vocabulary's rows; the slices' partial rows are summed through TpRegions. Under
// context parallel a pass holds two runs of positions (StepContext::sequence): their rows of the
// position table are copied side by side first, and their gradients added back after.
#pragma once
#include <vector>

#include "kernels/types.hpp"
#include "nn/embed_head_shape.hpp"
#include "nn/module.hpp"
#include "nn/tp_regions.hpp"

namespace dtrain {

class TokenEmbedding : public Module {
 public:
  TokenEmbedding(ComputeDevice& dev, const EmbedHeadShape& c, TpSlice slice = {}, TpRegions& regions = no_tp_regions());
  const ParamRef& table() const { return wte_; }  // [vocab, d] (this slice's rows): a tied head reads it
  VocabRange vocab_range() const { return {slice_.index * wte_.info().shape[0], wte_.info().shape[0]}; }

  void plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) override;
  int64_t scratch_floats(const StepContext& ctx) const override { return slice_.splits_rows() ? ctx.rows() * c_.dim : 0; }
  int64_t output_floats(const StepContext& ctx) const override { return slice_.local_rows(ctx.rows()) * c_.dim; }
  // Per token: the positions' add and the dropout forward, the dropout's and the scatter's backward
  // (no multiply-adds; counted so that pipeline stages balance as they always have).
  double train_flops_per_sample() const override { return 3.0 * double(c_.dim) * double(c_.seq_len); }
  void forward(const float* x, const UnitPass& p) override;
  const float* output(int slot) const override { return out_[size_t(slot)]; }
  // From its output's gradient dy (changed in place): the table's (and learned positions') gradients.
  void backward(const float* x, float* dy, float* dx, const UnitPass& p, BackwardPart part) override;

 private:
  ComputeDevice& dev_;
  EmbedHeadShape c_;
  TpSlice slice_;
  TpRegions& regions_;
  ParamRef wte_, wpe_;
  std::vector<float> pos_host_;  // the sinusoidal table [T, d], while its upload may be in flight
  float* pos_table_ = nullptr;
  // Context parallel (planned when a pass holds fewer positions than the table): the shard's rows
  // of the position table, and their gradient.
  float *pos_shard_ = nullptr, *pos_shard_grad_ = nullptr;
  const float* positions(const StepContext& ctx);  // the table a pass adds (null: none)
  void add_position_grads(const StepContext& ctx);  // pos_shard_grad_ into wpe's gradient
  std::vector<float*> out_;  // per slot: [rows, d] (sequence parallel: this slice's rows)
};

}  // namespace dtrain
