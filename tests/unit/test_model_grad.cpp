// Gradient check of a whole Transformer (its units run by the generic Model): the backward pass
// against central finite differences of the loss for every parameter tensor in each model variant,
// plus the determinism of dropout (run to run, thread count, batch split by sample offset).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model_test_util.hpp"

using namespace dtrain;

namespace {

constexpr int64_t kB = 2, kT = 5;

struct Threads {
  int saved;
  explicit Threads(int n) : saved(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved); }
};

TinyTransformer tiny() {
  return {.vocab = 11, .seq_len = kT, .dim = 8, .heads = 2, .layers = 2, .ff_dim = 12, .dropout = 0.0f};
}

// post-norm, relu, sinusoidal positions, untied head with bias, final norm
TransformerConfig post_relu() { return tiny_transformer(tiny()); }

// pre-norm, gelu, learned positions, tied head without bias, final norm
TransformerConfig pre_gelu() {
  TinyTransformer t = tiny();
  t.pre_norm = true;
  t.activation = Activation::gelu;
  t.tied = true;
  t.head_bias = false;
  return tiny_transformer(t);
}

struct TokenData {
  std::vector<int32_t> inputs, targets;
};

TokenData make_batch(uint32_t seed, int64_t V) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> u(0, int32_t(V - 1));
  TokenData b{std::vector<int32_t>(kB * kT), std::vector<int32_t>(kB * kT)};
  for (auto& x : b.inputs) x = u(g);
  for (auto& x : b.targets) x = u(g);
  return b;
}

StepContext make_ctx(const TransformerConfig& c, bool training, uint32_t step = 3) {
  StepContext ctx;
  ctx.B = kB;
  ctx.T = kT;
  ctx.training = training;
  ctx.dropout = c.dropout;
  ctx.seed = 1234;
  ctx.step = step;
  ctx.loss_scale = 1.0f / float(kB * kT);
  return ctx;
}

// Seeded init, then every parameter moved by a little noise so that LayerNorm weights are not all
// one and biases not zero (a backward that ignored them would otherwise pass).
void init_model(Model& m, uint64_t seed) {
  m.init_weights(seed);
  std::mt19937 g(uint32_t(seed) + 17);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  for (Unit* unit : m.units())
    for (const ParamInfo& p : unit->params()) {
      float* x = unit->param_data() + p.offset;
      for (int64_t i = 0; i < p.numel(); ++i) x[i] += u(g);
    }
}

std::vector<float> all_grads(const Model& m) {
  std::vector<float> g;
  for (Unit* unit : m.units()) g.insert(g.end(), unit->grad_data(), unit->grad_data() + unit->numel());
  return g;
}

// Checks every parameter tensor's gradient on up to kSample random elements against central
// differences of loss_fn() / rows evaluated in f32 with step 1e-2.
//
// With relu the loss is only piecewise smooth, and in this tiny model a kink of some unit lies
// within ±1e-2 of the point for a fair share of elements: there the central difference averages
// the slopes on both sides. An element that misses at 1e-2 is measured again at 2.5e-3 and 1e-3,
// centrally and one-sided (at a kink the backward pass gives the one-sided derivative of the side
// the unit is on), with the absolute tolerance widened for the larger rounding of a smaller step
// (f32 loss rounding ≈ 1e-7 / eps). A correct gradient matches at some step; one off by a sign or
// a factor matches at none, and the share of elements that need the retry is bounded.
template <class LossFn>
void check_gradients(Model& m, LossFn loss_fn, uint32_t seed, const std::string& tag) {
  constexpr int64_t kSample = 20;
  constexpr float kEps = 1e-2f, kRetrySteps[] = {2.5e-3f, 1e-3f};
  constexpr double kRtol = 3e-2;
  auto atol = [](double step) { return 1e-5 + 1e-7 / step; };  // 2e-5 at step 1e-2
  auto close = [&](double ana, double num, double step) {
    return std::fabs(ana - num) <= atol(step) + kRtol * std::fabs(num);
  };
  const double rows = double(kB * kT);
  const std::vector<float> grads = all_grads(m);  // loss_fn may overwrite the gradient buffers
  Threads one(1);  // hundreds of tiny passes: one thread avoids barrier costs on a loaded machine
  std::mt19937 g(seed);
  int checked_tensors = 0, retried = 0, total = 0;
  int64_t unit_offset = 0;
  for (Unit* unit : m.units()) {
    for (const ParamInfo& p : unit->params()) {
      float* x = unit->param_data() + p.offset;
      const float* grad = grads.data() + unit_offset + p.offset;
      const int64_t n = p.numel();
      std::vector<int64_t> idx(n);
      std::iota(idx.begin(), idx.end(), 0);
      std::shuffle(idx.begin(), idx.end(), g);
      idx.resize(std::min(n, kSample));
      double diff2 = 0, num2 = 0;
      int bad = 0;
      for (int64_t i : idx) {
        const double ana = grad[i];
        const float orig = x[i];
        auto loss_at = [&](float v) {
          x[i] = v;
          const double l = loss_fn() / rows;
          x[i] = orig;
          return l;
        };
        const float hi = orig + kEps, lo = orig - kEps;
        double num = (loss_at(hi) - loss_at(lo)) / (double(hi) - double(lo));
        bool ok = close(ana, num, kEps);
        std::ostringstream tried;
        tried << " " << num << " (central, 1e-2)";
        if (!ok) {
          ++retried;
          const double f0 = loss_at(orig);
          for (float eps : kRetrySteps) {
            const float h = orig + eps, l = orig - eps;
            const double fp = loss_at(h), fm = loss_at(l);
            const double central = (fp - fm) / (double(h) - double(l));
            const double right = (fp - f0) / (double(h) - double(orig));
            const double left = (f0 - fm) / (double(orig) - double(l));
            tried << ", " << central << " (central, " << eps << "), " << left << " / " << right
                  << " (left / right)";
            // one-sided differences round twice as badly: compare them as with half the step
            if (close(ana, central, eps)) num = central, ok = true;
            else if (close(ana, right, eps / 2)) num = right, ok = true;
            else if (close(ana, left, eps / 2)) num = left, ok = true;
            if (ok) break;
          }
        }
        ++total;
        diff2 += (ana - num) * (ana - num);
        num2 += num * num;
        if (!ok && ++bad <= 3)
          ADD_FAILURE() << tag << ": " << p.name << "[" << i << "]: backward " << ana
                        << ", finite differences" << tried.str();
      }
      EXPECT_EQ(bad, 0) << tag << ": " << p.name << ": " << bad << " of " << idx.size() << " elements off";
      // The whole sampled tensor: a sign or factor error on entries too small for the elementwise
      // test (below its absolute tolerance) shows up here.
      EXPECT_LE(std::sqrt(diff2), 0.1 * std::sqrt(num2) + 1e-6) << tag << ": " << p.name;
      ++checked_tensors;
    }
    unit_offset += unit->numel();
  }
  EXPECT_GT(checked_tensors, 10) << tag;
  // Most elements must match at the nominal step; a gradient that only matches by retrying is
  // suspicious even with relu.
  EXPECT_LE(retried, total / 3) << tag << ": " << retried << " of " << total << " needed a smaller step";
  if (getenv("DTRAIN_TEST_VERBOSE"))
    printf("%s: %d of %d elements re-measured with a smaller step\n", tag.c_str(), retried, total);
}

void gradient_case(const TransformerConfig& c, const std::string& tag, uint32_t seed) {
  Model m(transformer_units(c), kB);
  init_model(m, seed);
  const TokenData b = make_batch(seed + 1, c.vocab_size);
  StepContext ctx = make_ctx(c, false);
  m.zero_grad();
  const double loss = m.forward_backward(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
  // forward_loss is the same function
  const double eval = m.forward_loss(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
  EXPECT_NEAR(loss, eval, 1e-6 * loss) << tag;
  EXPECT_GT(loss / double(kB * kT), 1.0) << tag;  // ~log(11) for a fresh model
  EXPECT_LT(loss / double(kB * kT), 5.0) << tag;
  // per-row losses sum to the total
  std::vector<float> per_row(kB * kT);
  m.forward_loss(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx, per_row.data());
  double s = 0;
  for (float v : per_row) s += v;
  EXPECT_NEAR(s, loss, 1e-5 * loss) << tag;

  check_gradients(m, [&] { return m.forward_loss(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx); }, seed + 2, tag);
}

}  // namespace

TEST(ModelGrad, PostNormReluSinusoidalUntiedHeadBiasFinalNorm) {
  gradient_case(post_relu(), "post/relu/sinusoidal/untied/bias/final_norm", 1);
}

TEST(ModelGrad, PreNormGeluLearnedTiedNoHeadBias) {
  gradient_case(pre_gelu(), "pre/gelu/learned/tied/no bias", 2);
}

TEST(ModelGrad, NotCausal) {
  TransformerConfig c = post_relu();
  c.causal = false;
  gradient_case(c, "post, causal=false", 3);
  TransformerConfig p = pre_gelu();
  p.causal = false;
  gradient_case(p, "pre, causal=false", 4);
}

TEST(ModelGrad, NoFinalNorm) {
  TransformerConfig c = post_relu();
  c.final_norm = false;
  gradient_case(c, "post, final_norm=false", 5);
  TransformerConfig p = pre_gelu();
  p.final_norm = false;
  gradient_case(p, "pre, final_norm=false", 6);
}

// With dropout active the masks are a fixed function of (seed, step, unit, site, sample), so the
// training loss is a smooth function of the parameters and its gradient can be checked too.
TEST(ModelGrad, WithDropoutActive) {
  for (int pre = 0; pre < 2; ++pre) {
    TransformerConfig c = pre ? pre_gelu() : post_relu();
    c.dropout = 0.1f;
    const std::string tag = pre ? "pre, dropout 0.1" : "post, dropout 0.1";
    Model m(transformer_units(c), kB);
    init_model(m, 7 + pre);
    const TokenData b = make_batch(8 + pre, c.vocab_size);
    const StepContext ctx = make_ctx(c, true);
    m.zero_grad();
    m.forward_backward(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
    check_gradients(
        m,
        [&] {
          const double l = m.forward_backward(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
          m.zero_grad();
          return l;
        },
        9 + pre, tag);
  }
}

TEST(ModelDropout, DeterministicAcrossRunsAndThreads) {
  for (int pre = 0; pre < 2; ++pre) {
    TransformerConfig c = pre ? pre_gelu() : post_relu();
    c.dropout = 0.1f;
    const std::string tag = pre ? "pre" : "post";
    Model m(transformer_units(c), kB);
    init_model(m, 21);
    const TokenData b = make_batch(22, c.vocab_size);
    const StepContext ctx = make_ctx(c, true);

    m.zero_grad();
    const double l1 = m.forward_backward(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
    const std::vector<float> g1 = all_grads(m);
    m.zero_grad();
    const double l2 = m.forward_backward(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
    const std::vector<float> g2 = all_grads(m);
    EXPECT_EQ(l1, l2) << tag << ": same seed and step, different loss";
    EXPECT_EQ(g1, g2) << tag << ": same seed and step, different gradients";

    double lt[2];
    std::vector<float> gt[2];
    for (int t = 0; t < 2; ++t) {
      Threads th(t + 1);
      m.zero_grad();
      lt[t] = m.forward_backward(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
      gt[t] = all_grads(m);
    }
    EXPECT_NEAR(lt[0], lt[1], 1e-6 * std::fabs(lt[0])) << tag << ": 1 vs 2 threads";
    double d2 = 0, n2 = 0;
    for (size_t i = 0; i < gt[0].size(); ++i) {
      d2 += double(gt[0][i] - gt[1][i]) * double(gt[0][i] - gt[1][i]);
      n2 += double(gt[0][i]) * gt[0][i];
    }
    EXPECT_LE(std::sqrt(d2), 1e-5 * std::sqrt(n2)) << tag << ": gradients, 1 vs 2 threads";

    // Dropout really acts: the training loss differs from the dropout-off loss (training=false
    // and forward_loss agree), and another step draws other masks.
    StepContext off = ctx;
    off.training = false;
    m.zero_grad();
    const double l_off = m.forward_backward(token_batch(b.inputs.data(), b.targets.data(), off), off);
    const double l_eval = m.forward_loss(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
    EXPECT_NEAR(l_off, l_eval, 1e-6 * l_off) << tag;
    EXPECT_GT(std::fabs(l1 - l_off), 1e-3 * l_off) << tag << ": dropout had no effect on the loss";
    m.zero_grad();
    const double l_step = m.forward_backward(token_batch(b.inputs.data(), b.targets.data(), make_ctx(c, true, 4)), make_ctx(c, true, 4));
    EXPECT_NE(l_step, l1) << tag << ": step 3 and step 4 drew the same masks";
  }
}

// A batch split in two (as two data-parallel ranks would see it, each with its global sample
// offset) gives the same losses and summed gradients as the whole batch, dropout included.
TEST(ModelDropout, BatchSplitBySampleOffsetMatchesWholeBatch) {
  TransformerConfig c = post_relu();
  c.dropout = 0.2f;
  Model m(transformer_units(c), kB);
  init_model(m, 31);
  const TokenData b = make_batch(32, c.vocab_size);
  const StepContext ctx = make_ctx(c, true);
  m.zero_grad();
  const double whole = m.forward_backward(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
  const std::vector<float> gw = all_grads(m);

  m.zero_grad();
  double split = 0;
  for (int64_t s = 0; s < kB; ++s) {
    StepContext one = ctx;
    one.B = 1;
    one.sample_offset = s;  // loss_scale stays 1 / global rows
    split += m.forward_backward(token_batch(b.inputs.data() + s * kT, b.targets.data() + s * kT, one), one);
  }
  const std::vector<float> gs = all_grads(m);
  EXPECT_NEAR(split, whole, 1e-6 * whole);
  double d2 = 0, n2 = 0;
  for (size_t i = 0; i < gw.size(); ++i) {
    d2 += double(gw[i] - gs[i]) * double(gw[i] - gs[i]);
    n2 += double(gw[i]) * gw[i];
  }
  EXPECT_LE(std::sqrt(d2), 1e-5 * std::sqrt(n2));

  // With the wrong offset the second sample draws the first sample's masks: a different loss.
  m.zero_grad();
  StepContext wrong = ctx;
  wrong.B = 1;
  wrong.sample_offset = 0;
  const double l_wrong = m.forward_backward(token_batch(b.inputs.data() + kT, b.targets.data() + kT, wrong), wrong);
  m.zero_grad();
  StepContext right = wrong;
  right.sample_offset = 1;
  const double l_right = m.forward_backward(token_batch(b.inputs.data() + kT, b.targets.data() + kT, right), right);
  EXPECT_NE(l_wrong, l_right);
}

// bf16 compute follows the f32 loss closely.
TEST(ModelGrad, Bf16LossCloseToF32) {
  TransformerConfig c = pre_gelu();
  Model m(transformer_units(c), kB);
  init_model(m, 41);
  const TokenData b = make_batch(42, c.vocab_size);
  StepContext ctx = make_ctx(c, false);
  const double l32 = m.forward_loss(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
  ctx.precision = Precision::bf16;
  const double l16 = m.forward_loss(token_batch(b.inputs.data(), b.targets.data(), ctx), ctx);
  EXPECT_NEAR(l16, l32, 1e-2 * l32);
  // where the CPU runs bf16, the precision is really used (elsewhere matmul may fall back to f32)
  if (cpu_has_native_bf16()) {
    EXPECT_NE(l16, l32);
  }
}
