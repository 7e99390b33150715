// The weights' bf16 copy (StagePlan::bf16_weights, train.precision = bf16): bf16 products read the
// parameters rounded once per update instead of rounding them on every call, so a run with the copy
// gives the bits of one without it — every loss and every parameter over several optimizer steps, for
// the Transformer (untied and tied), Llama and a mixture of experts (AdamW and SGD) — and the copy,
// kept of the units products read only, equals the parameters rounded after initialisation, after
// each update and after a load (upload_host_params).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.hpp"
#include "model_test_util.hpp"
#include "models/llama/kind.hpp"
#include "models/transformer/kind.hpp"
#include "nn/model.hpp"
#include "optim/optimizer.hpp"

using namespace dtrain;

namespace {

constexpr int64_t kRows = 3;
constexpr int kSteps = 3;

struct Case {
  std::string name;
  std::function<UnitList()> units;
  int64_t T;
  int32_t vocab;
};

std::vector<Case> cases() {
  const TransformerConfig t = tiny_transformer(
      {.vocab = 19, .seq_len = 8, .dim = 16, .heads = 2, .layers = 2, .ff_dim = 24, .dropout = 0.1f}),
                          tied = tiny_transformer({.vocab = 19, .seq_len = 8, .dim = 16, .heads = 2, .layers = 2,
                                                   .ff_dim = 24, .dropout = 0.1f, .pre_norm = true, .tied = true});
  const LlamaConfig l = tiny_llama(2, 0.1f);
  auto moe = [l] { return tiny_moe_units(l); };
  return {{"transformer", [t] { return transformer_units(t); }, t.seq_len, int32_t(t.vocab_size)},
          {"transformer, tied head", [tied] { return transformer_units(tied); }, t.seq_len, int32_t(t.vocab_size)},
          {"llama", [l] { return llama_units(l); }, l.seq_len, int32_t(l.vocab_size)},
          {"mixture of experts", moe, l.seq_len, int32_t(l.vocab_size)}};
}

StepContext context(const Case& c, int step) {
  StepContext ctx;
  ctx.precision = Precision::bf16;
  ctx.B = kRows;
  ctx.T = c.T;
  ctx.training = true;
  ctx.dropout = 0.1f;
  ctx.seed = 3;
  ctx.step = step;
  ctx.loss_scale = 1.0f / float(kRows * c.T);
  return ctx;
}

std::vector<float> params_of(Model& m) {
  const float* p = m.host_params();
  int64_t n = 0;
  for (const Unit* u : m.units()) n += u->numel();
  return {p, p + n};
}

// Every unit products read has a bf16 copy (the others none), its parameters rounded, element for element.
void expect_copy_current(const Model& m, const std::string& when) {
  for (const Unit* u : m.units()) {
    ASSERT_EQ(u->param_bf16() != nullptr, u->read_by_products()) << u->name();
    if (!u->param_bf16()) continue;
    int64_t stale = 0;
    for (int64_t i = 0; i < u->numel(); ++i) stale += u->param_bf16()[i] != to_bf16(u->param_data()[i]).bits;
    EXPECT_EQ(stale, 0) << u->name() << ": elements of the bf16 copy not equal to the parameters rounded, " << when;
  }
}

struct Trajectory {
  std::vector<double> losses;
  std::vector<float> params;
};

Trajectory train(const Case& c, bool copy, const std::string& optimizer) {
  StagePlan plan;
  plan.bf16_activations = true;
  plan.bf16_weights = copy;
  Model m(c.units(), kRows, cpu_device(), ParamStorage::owned, plan);
  int64_t read = 0;  // parameters of the units products read: all but an untied embedding's
  for (const Unit* u : m.units()) read += u->read_by_products() ? u->numel() : 0;
  EXPECT_EQ(m.bf16_weight_bytes(), copy ? read * int64_t(sizeof(uint16_t)) : 0);
  EXPECT_EQ(m.units().front()->read_by_products(), !m.units().back()->reads().empty()) << "the embedding: only if tied";
  m.init_weights(9);
  if (copy) expect_copy_current(m, "after init_weights");
  OptimizerConfig oc;
  oc.name = optimizer;
  oc.lr = 0.01f;
  oc.momentum = 0.9f;
  Optimizer opt(oc, unit_shards(m.units()));
  std::mt19937 g(4);
  std::uniform_int_distribution<int32_t> token(0, c.vocab - 1);
  std::vector<int32_t> in(size_t(kRows * c.T)), tgt(in.size());
  Trajectory r;
  for (int step = 0; step < kSteps; ++step) {
    for (auto& t : in) t = token(g);
    for (auto& t : tgt) t = token(g);
    const StepContext ctx = context(c, step);
    m.zero_grad();
    r.losses.push_back(m.forward_backward(token_batch(in.data(), tgt.data(), ctx), ctx));
    opt.step(oc.lr);
    if (copy) expect_copy_current(m, "after update " + std::to_string(step + 1) + " (" + optimizer + ")");
  }
  r.params = params_of(m);
  return r;
}

}  // namespace

TEST(Bf16Weights, TrainingWithTheCopyGivesTheBitsOfRoundingInEveryProduct) {
  if (!cpu_device().bf16_products()) GTEST_SKIP() << "this CPU has no bf16 matrix products (the copy is not kept)";
  for (const Case& c : cases())
    for (const std::string opt : {"adamw", "sgd"}) {
      SCOPED_TRACE(c.name + ", " + opt);
      const Trajectory without = train(c, false, opt), with = train(c, true, opt);
      ASSERT_EQ(with.losses.size(), size_t(kSteps));
      for (int s = 0; s < kSteps; ++s) EXPECT_EQ(with.losses[size_t(s)], without.losses[size_t(s)]) << "step " << s + 1;
      EXPECT_NE(with.losses.front(), with.losses.back()) << "training moved nothing";
      ASSERT_EQ(with.params.size(), without.params.size());
      EXPECT_EQ(std::memcmp(with.params.data(), without.params.data(), with.params.size() * sizeof(float)), 0)
          << "the parameters after " << kSteps << " updates differ";
    }
}

TEST(Bf16Weights, ALoadRefreshesTheCopy) {
  if (!cpu_device().bf16_products()) GTEST_SKIP() << "this CPU has no bf16 matrix products";
  const Case c = cases()[2];  // Llama
  StagePlan plan;
  plan.bf16_activations = plan.bf16_weights = true;
  Model m(c.units(), kRows, cpu_device(), ParamStorage::owned, plan);
  m.init_weights(9);
  float* host = m.host_params();
  int64_t n = 0;
  for (const Unit* u : m.units()) n += u->numel();
  for (int64_t i = 0; i < n; ++i) host[i] = host[i] * 0.5f + 1e-3f;  // what a checkpoint would load
  m.upload_host_params();
  expect_copy_current(m, "after upload_host_params");
  // and a model without the copy, given the same parameters, computes the same loss
  StagePlan plain = plan;
  plain.bf16_weights = false;
  Model w(c.units(), kRows, cpu_device(), ParamStorage::owned, plain);
  std::memcpy(w.host_params(), host, sizeof(float) * size_t(n));
  w.upload_host_params();
  std::vector<int32_t> in(size_t(kRows * c.T), 5), tgt(in.size(), 7);
  const StepContext ctx = context(c, 0);
  EXPECT_EQ(m.forward_backward(token_batch(in.data(), tgt.data(), ctx), ctx),
            w.forward_backward(token_batch(in.data(), tgt.data(), ctx), ctx));
}
