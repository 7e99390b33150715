// The model reads a unit's parameters only between that unit's pre and post hooks, in training
// (forward and backward) and in evaluation (loss and logits): what sharded storage (FSDP) needs to
// gather a unit's parameters just in time; a hook poisons every unit's parameters outside its
// window. And a unit's initial values can be made for any range of it (a shard) directly.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "model_test_util.hpp"

using namespace dtrain;

namespace {

constexpr int64_t kB = 2, kT = 6;

// Outside a unit's forward or backward window its parameters are NaN; inside they are restored,
// with those of the units it declares it reads (a tied head: the embedding) in its forward window,
// and not at all in the backward of a unit that declares its backward reads none (the embedding).
class PoisonOutsideWindows : public UnitHooks {
 public:
  explicit PoisonOutsideWindows(const std::vector<Unit*>& units) {
    for (Unit* u : units) poison(*u);
  }
  ~PoisonOutsideWindows() override {
    for (auto& [u, saved] : saved_) std::copy(saved.begin(), saved.end(), u->param_data());
  }
  void pre_forward(Unit& u) override {
    restore(u);
    for (Unit* r : u.reads()) restore(*r);
  }
  void post_forward(Unit& u) override {
    poison(u);
    for (Unit* r : u.reads()) poison(*r);
  }
  void pre_backward(Unit& u) override {
    if (u.backward_reads_params()) restore(u);
  }
  void post_backward(Unit& u) override { poison(u); }

 private:
  void poison(Unit& u) {
    if (std::isnan(u.param_data()[0])) return;  // poisoned already
    saved_[&u].assign(u.param_data(), u.param_data() + u.numel());
    std::fill(u.param_data(), u.param_data() + u.numel(), std::nanf(""));
  }
  void restore(Unit& u) { std::copy(saved_[&u].begin(), saved_[&u].end(), u.param_data()); }
  std::map<Unit*, std::vector<float>> saved_;
};

TransformerConfig config(bool pre_norm, bool tied = false) {  // relu, final norm, head bias
  return tiny_transformer({.vocab = 13, .seq_len = kT, .dim = 8, .heads = 2, .layers = 2, .ff_dim = 16,
                           .dropout = 0.1f, .pre_norm = pre_norm, .tied = tied});
}

std::vector<float> grads_of(const Model& m) {
  std::vector<float> g;
  for (Unit* u : m.units()) g.insert(g.end(), u->grad_data(), u->grad_data() + u->numel());
  return g;
}

void check_windows(const TransformerConfig& c) {
  Model m(transformer_units(c), kB);
  m.init_weights(7);
  std::mt19937 gen(3);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(c.vocab_size - 1));
  std::vector<int32_t> in(kB * kT), tgt(kB * kT);
  for (auto& x : in) x = tok(gen);
  for (auto& x : tgt) x = tok(gen);
  StepContext ctx;
  ctx.B = kB;
  ctx.T = kT;
  ctx.training = true;
  ctx.dropout = c.dropout;
  ctx.seed = 5;
  ctx.loss_scale = 1.0f / float(kB * kT);

  m.zero_grad();
  const double loss = m.forward_backward(token_batch(in.data(), tgt.data(), ctx), ctx);
  const std::vector<float> grads = grads_of(m);
  const double eval = m.forward_loss(token_batch(in.data(), tgt.data(), ctx), ctx);
  std::vector<float> logits(size_t(kB * kT * c.vocab_size)), logits_hooked(logits.size());
  m.predict(token_batch(in.data(), nullptr, ctx), ctx, logits.data());

  m.zero_grad();
  double loss_hooked = 0, eval_hooked = 0;
  {
    PoisonOutsideWindows poison(m.units());
    loss_hooked = m.forward_backward(token_batch(in.data(), tgt.data(), ctx), ctx, &poison);
    eval_hooked = m.forward_loss(token_batch(in.data(), tgt.data(), ctx), ctx, nullptr, &poison);
    m.predict(token_batch(in.data(), nullptr, ctx), ctx, logits_hooked.data(), &poison);
  }
  EXPECT_EQ(loss_hooked, loss) << "training read a parameter outside its unit's window";
  EXPECT_EQ(grads_of(m), grads);
  EXPECT_EQ(eval_hooked, eval) << "evaluation read a parameter outside its unit's window";
  EXPECT_EQ(logits_hooked, logits);
}

}  // namespace

TEST(ModelHooks, PostNormModelReadsParametersOnlyInsideTheirUnitsWindows) { check_windows(config(false)); }
TEST(ModelHooks, PreNormModelReadsParametersOnlyInsideTheirUnitsWindows) { check_windows(config(true)); }
TEST(ModelHooks, TiedHeadReadsTheEmbeddingOnlyInItsDeclaredWindow) { check_windows(config(true, true)); }

// Any range of a unit's flat buffer initialises to the same values as that slice of the whole
// model's initialisation: a 1/N shard can be made without the whole unit ever existing.
TEST(ModelInit, AnyRangeOfAUnitEqualsThatSliceOfTheWholeInit) {
  TransformerConfig c = config(false);
  c.tied = true;
  Model m(transformer_units(c), 1);
  m.init_weights(11);
  std::mt19937 gen(9);
  int ranges = 0;
  for (Unit* u : m.units()) {
    const std::vector<float> whole(u->param_data(), u->param_data() + u->numel());
    for (int shards : {1, 2, 3, 7}) {  // equal shards, the last one short, as FSDP cuts them
      const int64_t per = (u->numel() + shards - 1) / shards;
      for (int s = 0; s < shards; ++s) {
        const int64_t lo = std::min(u->numel(), s * per), hi = std::min(u->numel(), lo + per);
        std::vector<float> part(size_t(hi - lo), -1.0f);
        init_unit_range(*u, 11, lo, hi, part.data());
        EXPECT_EQ(part, std::vector<float>(whole.begin() + lo, whole.begin() + hi)) << u->name() << " shard " << s;
        ++ranges;
      }
    }
    std::uniform_int_distribution<int64_t> pick(0, u->numel());
    int64_t a = pick(gen), b = pick(gen);
    if (a > b) std::swap(a, b);
    std::vector<float> part(size_t(b - a));
    init_unit_range(*u, 11, a, b, part.data());
    EXPECT_EQ(part, std::vector<float>(whole.begin() + a, whole.begin() + b)) << u->name();
  }
  EXPECT_GT(ranges, 40);
}
