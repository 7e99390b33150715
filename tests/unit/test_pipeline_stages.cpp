// Pipeline stages in one process: models that each hold some of the units (one contiguous range,
// or two as a rank of an interleaved or V schedule does) initialise to the whole model's weights,
// and, passing hidden states and their gradients between them by hand, several micro-batches in
// flight in their own activation slots give the loss and gradients of the whole model on the whole
// batch, with the backward whole (B) or split into input (I) and weight (W) halves, dropout on,
// post-norm and pre-norm (GELU, learned positions).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "model_test_util.hpp"

using namespace dtrain;

namespace {

constexpr int64_t kT = 8, kMicro = 2, kMicroRows = 3, kB = kMicro * kMicroRows;

TransformerConfig small(bool pre_norm) {
  return tiny_transformer({.vocab = 23, .seq_len = kT, .dim = 16, .heads = 2, .layers = 4, .ff_dim = 32,
                           .dropout = 0.2f, .pre_norm = pre_norm,
                           .activation = pre_norm ? Activation::gelu : Activation::relu});
}

StepContext context(int64_t rows, int64_t first_sample) {
  StepContext ctx;
  ctx.B = rows;
  ctx.T = kT;
  ctx.training = true;
  ctx.dropout = 0.2f;
  ctx.seed = 5;
  ctx.step = 2;
  ctx.sample_offset = first_sample;
  ctx.loss_scale = 1.0f / float(kB * kT);
  return ctx;
}

// name → the gradient of every parameter the model holds
std::map<std::string, std::vector<float>> grads_of(const Model& m) {
  std::map<std::string, std::vector<float>> g;
  for (const Unit* u : m.units())
    for (const ParamInfo& p : u->params())
      g[p.name].assign(u->grad_data() + p.offset, u->grad_data() + p.offset + p.numel());
  return g;
}

std::map<std::string, std::vector<float>> params_of(const Model& m) {
  std::map<std::string, std::vector<float>> g;
  for (const Unit* u : m.units())
    for (const ParamInfo& p : u->params())
      g[p.name].assign(u->param_data() + p.offset, u->param_data() + p.offset + p.numel());
  return g;
}

// `ranks`: the stage ranges each model holds; stages are numbered in model order across them.
// other_slots: every stage but the first keeps micro-batch mb in slot kMicro-1-mb (a stage's slots
// are its own: a rank's two stages of a V schedule hold the same micro-batch in different slots).
void pipeline_equals_whole(bool pre_norm, const std::vector<std::vector<std::pair<int, int>>>& ranks, bool split,
                           bool other_slots = false) {
  auto slot = [&](size_t s, int mb) { return other_slots && s > 0 ? int(kMicro) - 1 - mb : mb; };
  const TransformerConfig c = small(pre_norm);
  std::mt19937 g(3);
  std::uniform_int_distribution<int32_t> word(0, int32_t(c.vocab_size - 1));
  std::vector<int32_t> inputs(kB * kT), targets(kB * kT);
  for (auto& x : inputs) x = word(g);
  for (auto& x : targets) x = word(g);

  Model whole(transformer_units(c), kB);
  whole.init_weights(9);
  whole.zero_grad();
  const double loss = whole.forward_backward(token_batch(inputs.data(), targets.data(), context(kB, 0)), context(kB, 0));
  const auto want = grads_of(whole), want_params = params_of(whole);

  std::vector<std::unique_ptr<Model>> models;
  struct At {
    Model* model;
    int k;
  };
  std::vector<At> stages;  // in model order
  for (const auto& held : ranks) {
    StagePlan plan{held, int(kMicro), split};
    models.push_back(build_transformer(c, kMicroRows, cpu_device(), ParamStorage::owned, TpSlice{}, no_tp_regions(), plan));
    models.back()->init_weights(9);
    models.back()->zero_grad();
  }
  for (size_t r = 0; r < ranks.size(); ++r)
    for (size_t k = 0; k < ranks[r].size(); ++k) stages.push_back({models[r].get(), int(k)});
  std::sort(stages.begin(), stages.end(), [&](const At& a, const At& b) {
    auto first = [&](const At& x) {
      for (size_t r = 0; r < models.size(); ++r)
        if (models[r].get() == x.model) return ranks[r][size_t(x.k)].first;
      return -1;
    };
    return first(a) < first(b);
  });
  // every parameter exists in exactly one stage model, equal to the whole model's
  size_t held = 0;
  for (const auto& m : models)
    for (const auto& [name, v] : params_of(*m)) {
      EXPECT_EQ(v, want_params.at(name)) << name;
      ++held;
    }
  EXPECT_EQ(held, want_params.size());

  // GPipe order: every micro-batch forward through all stages, then backward in reverse
  const int64_t n = kMicroRows * kT * c.dim;
  for (int mb = 0; mb < kMicro; ++mb) {
    const StepContext ctx = context(kMicroRows, mb * kMicroRows);
    const int32_t* in = inputs.data() + mb * kMicroRows * kT;
    const int32_t* tg = targets.data() + mb * kMicroRows * kT;
    for (size_t s = 0; s < stages.size(); ++s) {
      if (s > 0) std::copy_n(stages[s - 1].model->stage_output(stages[s - 1].k, slot(s - 1, mb)), n,
                             stages[s].model->stage_input(stages[s].k, slot(s, mb)));
      stages[s].model->stage_forward(stages[s].k, slot(s, mb), token_batch(in, tg, ctx), ctx, true, nullptr);
    }
  }
  for (int mb = kMicro; mb-- > 0;) {
    const StepContext ctx = context(kMicroRows, mb * kMicroRows);
    for (size_t s = stages.size(); s-- > 0;) {
      if (s + 1 < stages.size())
        std::copy_n(stages[s + 1].model->stage_input_grad(stages[s + 1].k, slot(s + 1, mb)), n,
                    stages[s].model->stage_output_grad(stages[s].k, slot(s, mb)));
      stages[s].model->stage_backward(stages[s].k, slot(s, mb), ctx, split ? BackwardPart::input : BackwardPart::all,
                                      nullptr);
    }
  }
  if (split)  // the weight halves last, micro-batch by micro-batch
    for (int mb = 0; mb < kMicro; ++mb)
      for (size_t s = 0; s < stages.size(); ++s)
        stages[s].model->stage_backward(stages[s].k, slot(s, mb), context(kMicroRows, mb * kMicroRows),
                                        BackwardPart::weight, nullptr);
  double got_loss = 0.0;
  for (const auto& m : models) got_loss += m->take_loss();
  EXPECT_NEAR(got_loss, loss, 1e-5 * std::fabs(loss));
  size_t checked = 0;
  for (const auto& m : models)
    for (const auto& [name, v] : grads_of(*m)) {
      const std::vector<float>& w = want.at(name);
      double err = 0.0, norm = 0.0;
      for (size_t i = 0; i < v.size(); ++i) {
        err = std::max(err, std::fabs(double(v[i]) - double(w[i])));
        norm = std::max(norm, std::fabs(double(w[i])));
      }
      EXPECT_LE(err, 1e-5 * (1.0 + norm)) << name;
      EXPECT_GT(norm, 0.0) << name << ": no gradient at all";
      ++checked;
    }
  EXPECT_EQ(checked, want.size());
}

}  // namespace

TEST(PipelineStages, ThreeContiguousStagesEqualTheWholeModel) {
  pipeline_equals_whole(false, {{{0, 2}}, {{2, 4}}, {{4, 6}}}, false);
}

TEST(PipelineStages, SplitBackwardInputThenWeightEqualsTheWholeBackward) {
  pipeline_equals_whole(false, {{{0, 2}}, {{2, 4}}, {{4, 6}}}, true);
}

TEST(PipelineStages, TwoStagesPerModelAsInAVScheduleEqualTheWholeModel) {
  // rank 0 holds the first and the last stage (embedding alone; the head alone), rank 1 the middle
  pipeline_equals_whole(true, {{{0, 1}, {5, 6}}, {{1, 3}, {3, 5}}}, true);
  pipeline_equals_whole(true, {{{0, 1}, {5, 6}}, {{1, 3}, {3, 5}}}, false);
}

TEST(PipelineStages, ARanksTwoStagesKeepTheirOwnSlots) {
  // the head's stage holds micro-batch mb in another slot than the embedding's on the same model:
  // each keeps its own inputs (the embedding's tokens for its backward), whatever the other does
  pipeline_equals_whole(true, {{{0, 1}, {5, 6}}, {{1, 3}, {3, 5}}}, false, true);
  pipeline_equals_whole(true, {{{0, 1}, {5, 6}}, {{1, 3}, {3, 5}}}, true, true);
}

TEST(PipelineStages, AStageBuildsOnlyItsUnitsParameters) {
  const TransformerConfig c = small(false);
  Model whole(transformer_units(c), 1),
      part(transformer_units(c), 1, cpu_device(), ParamStorage::owned, StagePlan{{{2, 4}}, 1, false});
  ASSERT_EQ(part.units().size(), 2u);
  EXPECT_EQ(part.units()[0]->name(), "blocks.1");
  EXPECT_EQ(part.units()[1]->name(), "blocks.2");
  EXPECT_EQ(part.num_params(), whole.num_params());  // of the whole model
  EXPECT_LT(part.activation_bytes(), whole.activation_bytes());
}
