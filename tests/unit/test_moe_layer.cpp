// The mixture-of-experts layer (nn/moe_layer.hpp): its output against a double-precision reference
// written token by token (router scores, top-k with ties to the lower expert, renormalised weights,
// SwiGLU experts), and its backward (input, router and every expert's gradients, the balance loss's
// share included) against central differences; softmax and sigmoid routers.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/device.hpp"
#include "nn/moe_layer.hpp"

using namespace dtrain;

namespace {

struct Fixture {
  MoeSpec spec;
  Unit unit{"layer"};
  MoeLayer layer;
  std::vector<float> params, grads, scratch;
  Arena arena;
  int64_t rows, T;  // T: each sample's rows
  Precision precision;

  // bf16_kept: the experts' gate, up and SwiGLU output kept in bf16 (forward then in bf16 products)
  Fixture(const MoeSpec& s, int64_t rows_, uint32_t seed, bool bf16_kept = false)
      : spec(s), rows(rows_), T(rows_), precision(bf16_kept ? Precision::bf16 : Precision::f32) {
    layer = MoeLayer(cpu_device(), unit, unit, "mlp.", s);  // the router and the experts in one unit
    params.resize(size_t(unit.numel()));
    grads.assign(params.size(), 0.0f);
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-0.6f, 0.6f);
    for (float& p : params) p = u(g);
    unit.bind(params.data(), grads.data());
    layer.plan(arena, rows, 1, bf16_kept);
    scratch.resize(size_t(layer.scratch_floats(rows)));
  }
  std::vector<float> forward(const std::vector<float>& x) {
    std::vector<float> y(x.size());
    layer.forward(x.data(), y.data(), rows, T, SequenceShard{}, 0, scratch.data(), precision);
    return y;
  }
};

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// y for one token, in double, from the layer's parameters as laid out (router, then per expert gate,
// up, down).
std::vector<double> reference_token(const Fixture& f, const float* x) {
  const MoeSpec& s = f.spec;
  const int64_t d = s.dim, E = s.experts, ff = s.expert_ff;
  const auto at = [&](size_t i) { return f.params.data() + f.unit.params()[i].offset; };
  const float* W = at(0);
  std::vector<double> score(static_cast<size_t>(E));
  double mx = -1e300, sum = 0.0;
  for (int64_t e = 0; e < E; ++e) {
    double l = 0.0;
    for (int64_t i = 0; i < d; ++i) l += double(x[i]) * W[e * d + i];
    score[size_t(e)] = l;
    mx = std::max(mx, l);
  }
  for (double& v : score) sum += v = s.sigmoid ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v - mx);
  if (!s.sigmoid)
    for (double& v : score) v /= sum;
  std::vector<int> chosen;
  for (int64_t j = 0; j < s.top_k; ++j) {
    int best = -1;
    for (int e = 0; e < int(E); ++e)
      if (std::find(chosen.begin(), chosen.end(), e) == chosen.end() && (best < 0 || score[size_t(e)] > score[size_t(best)]))
        best = e;
    chosen.push_back(best);
  }
  double wsum = 0.0;
  for (int e : chosen) wsum += score[size_t(e)];
  std::vector<double> y(static_cast<size_t>(d), 0.0);
  for (int e : chosen) {
    const float *gate = at(size_t(1 + 3 * e)), *up = at(size_t(2 + 3 * e)), *down = at(size_t(3 + 3 * e));
    const double w = s.normalize ? score[size_t(e)] / wsum : score[size_t(e)];
    std::vector<double> a(static_cast<size_t>(ff));
    for (int64_t h = 0; h < ff; ++h) {
      double gv = 0.0, uv = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        gv += double(gate[h * d + i]) * x[i];
        uv += double(up[h * d + i]) * x[i];
      }
      a[size_t(h)] = silu(gv) * uv;
    }
    for (int64_t o = 0; o < d; ++o) {
      double v = 0.0;
      for (int64_t h = 0; h < ff; ++h) v += double(down[o * ff + h]) * a[size_t(h)];
      y[size_t(o)] += w * v;
    }
  }
  return y;
}

MoeSpec spec(bool sigmoid) {
  MoeSpec s;
  s.dim = 8;  // expert_ff · dim a multiple of 16: gate_proj and up_proj adjacent
  s.experts = 5;
  s.top_k = 2;
  s.expert_ff = 4;
  s.sigmoid = sigmoid;
  s.normalize = !sigmoid;
  return s;
}

}  // namespace

// 12 rows; and 700, whose experts' products run in pieces of 256 rows and a tail of powers of two.
TEST(MoeLayer, ForwardMatchesTheTokenByTokenReference) {
  for (const auto& [sigmoid, rows] : {std::pair{false, 12}, std::pair{true, 12}, std::pair{false, 700}}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    Fixture f(spec(sigmoid), rows, 91);
    std::mt19937 g(92);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(size_t(f.rows * f.spec.dim));
    for (float& v : x) v = u(g);
    const std::vector<float> y = f.forward(x);
    for (int64_t t = 0; t < f.rows; ++t) {
      const std::vector<double> want = reference_token(f, x.data() + t * f.spec.dim);
      for (int64_t i = 0; i < f.spec.dim; ++i)
        EXPECT_NEAR(y[size_t(t * f.spec.dim + i)], want[size_t(i)], 2e-6) << "token " << t << " column " << i;
    }
    int64_t routed = 0;
    for (int64_t c : f.layer.tokens_per_expert(0)) routed += c;
    EXPECT_EQ(routed, f.rows * f.spec.top_k);
  }
}

// L = Σ y·dy + aux_scale · (the balance loss summed over the samples): the analytic gradients of x
// and of every parameter against central differences (in double over the float layer).
TEST(MoeLayer, BackwardMatchesDifferences) {
  for (bool sigmoid : {false, true}) {
    SCOPED_TRACE(sigmoid ? "sigmoid router" : "softmax router");
    const int64_t T = 4;
    Fixture f(spec(sigmoid), 3 * T, 93);
    f.T = T;
    std::mt19937 g(94);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(size_t(f.rows * f.spec.dim)), dy(x.size());
    for (float& v : x) v = u(g);
    for (float& v : dy) v = u(g);
    const float aux_scale = 0.3f;
    auto loss = [&] {
      const std::vector<float> y = f.forward(x);
      double l = 0.0;
      for (size_t i = 0; i < y.size(); ++i) l += double(y[i]) * dy[i];
      return l + aux_scale * f.layer.balance_loss_sum(0);
    };
    loss();
    const std::vector<int64_t> routed = f.layer.tokens_per_expert(0);
    std::vector<float> dx(x.size());
    f.layer.backward(x.data(), dy.data(), dx.data(), f.rows, aux_scale, 0, f.scratch.data(), Precision::f32);
    auto check = [&](std::vector<float>& v, const std::vector<float>& analytic, const char* what) {
      double worst = 0.0, scale = 0.0;
      for (size_t i = 0; i < v.size(); ++i) {
        const float keep = v[i], eps = 1e-3f;
        v[i] = keep + eps;
        const double hi = loss();
        v[i] = keep - eps;
        const double lo = loss();
        v[i] = keep;
        ASSERT_EQ(f.layer.tokens_per_expert(0), routed) << what << ": a step changed the routing";
        const double num = (hi - lo) / (2.0 * double(eps));
        worst = std::max(worst, std::fabs(num - double(analytic[i])));
        scale = std::max(scale, std::fabs(num));
      }
      EXPECT_GT(scale, 0.0) << what;
      EXPECT_LT(worst, 2e-3 * scale) << what << ": worst difference " << worst << " of " << scale;
    };
    check(x, dx, "d x");
    const std::vector<float> analytic = f.grads;
    check(f.params, analytic, "d parameters");
  }
}

// The experts' gate, up and SwiGLU output kept in bf16 (train.precision = bf16): the same routing (the
// router reads its input in f32), and y, dx and every gradient within bf16's tolerance of bf16 products
// on f32 storage.
TEST(MoeLayer, KeptInBf16CloseToBf16ProductsOnF32) {
  if (!cpu_device().bf16_products()) GTEST_SKIP() << "this CPU has no bf16 matrix products";
  const int64_t rows = 40;
  Fixture kept(spec(false), rows, 95, true), plain(spec(false), rows, 95, false);
  plain.precision = Precision::bf16;
  std::mt19937 g(96);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(size_t(rows * kept.spec.dim)), dy(x.size()), dx_kept(x.size()), dx_plain(x.size());
  for (float& v : x) v = u(g);
  for (float& v : dy) v = u(g);
  const std::vector<float> y_kept = kept.forward(x), y_plain = plain.forward(x);
  EXPECT_EQ(kept.layer.tokens_per_expert(0), plain.layer.tokens_per_expert(0));
  kept.layer.backward(x.data(), dy.data(), dx_kept.data(), rows, 0.0f, 0, kept.scratch.data(), Precision::bf16);
  plain.layer.backward(x.data(), dy.data(), dx_plain.data(), rows, 0.0f, 0, plain.scratch.data(), Precision::bf16);
  auto rel = [](const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0.0, n = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      n += double(b[i]) * b[i];
    }
    return std::sqrt(d / n);
  };
  EXPECT_LT(rel(y_kept, y_plain), 1e-2);
  EXPECT_GT(rel(y_kept, y_plain), 0.0);  // SwiGLU read the rounded gate and up
  EXPECT_LT(rel(dx_kept, dx_plain), 2e-2);
  EXPECT_LT(rel(kept.grads, plain.grads), 2e-2);
}
