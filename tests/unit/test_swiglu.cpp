// SwiGLU: forward and backward against a double reference, backward against finite differences,
// in place, large |gate| (finite and exact), and thread-count independence.
#include <cfloat>

#include "kernel_test_util.hpp"
#include "kernels/cpu/swiglu.hpp"

namespace {
double sigmoid_ref(double g) { return g >= 0 ? 1.0 / (1.0 + std::exp(-g)) : std::exp(g) / (1.0 + std::exp(g)); }
double silu_ref(double g) { return g * sigmoid_ref(g); }
double silu_grad_ref(double g) {
  const double s = sigmoid_ref(g), sm = sigmoid_ref(-g);
  return s * (1.0 + g * sm);
}

// y [rows, f] and da [rows, 2f] of the double formulas.
void ref_swiglu(const Vec& a, const Vec& dy, int64_t rows, int64_t f, DVec& y, DVec& da) {
  y.assign(rows * f, 0.0);
  da.assign(rows * 2 * f, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < f; ++j) {
      const double g = a[r * 2 * f + j], u = a[r * 2 * f + f + j], d = dy[r * f + j];
      y[r * f + j] = silu_ref(g) * u;
      da[r * 2 * f + j] = d * u * silu_grad_ref(g);
      da[r * 2 * f + f + j] = d * silu_ref(g);
    }
}

// Rows of [gate | up]: gates in [-glo, glo], ups in [-2, 2].
Vec rand_rows(int64_t rows, int64_t f, std::mt19937& g, float glo) {
  Vec a(rows * 2 * f);
  std::uniform_real_distribution<float> ug(-glo, glo), uu(-2.0f, 2.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < f; ++j) {
      a[r * 2 * f + j] = ug(g);
      a[r * 2 * f + f + j] = uu(g);
    }
  return a;
}

struct Shape {
  int64_t rows, f;
};
}  // namespace

TEST(SwiGlu, ForwardAndBackwardMatchReference) {
  std::mt19937 g(70);
  for (const Shape s : {Shape{1, 1}, Shape{1, 37}, Shape{7, 19}, Shape{4, 64}, Shape{33, 130}}) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + ", f " + std::to_string(s.f));
    Vec a = rand_rows(s.rows, s.f, g, 8.0f), dy = randu(s.rows * s.f, g);
    a[0] = 0.0f;  // silu(0) = 0, silu'(0) = 1/2
    Vec y(s.rows * s.f, 77.0f), da(s.rows * 2 * s.f, 77.0f);  // both written, not accumulated
    swiglu_forward(a.data(), y.data(), s.rows, s.f);
    swiglu_backward(a.data(), dy.data(), da.data(), s.rows, s.f);
    DVec ry, rda;
    ref_swiglu(a, dy, s.rows, s.f, ry, rda);
    expect_close(y, ry, 2e-6, 1e-7, "y");
    expect_close(da, rda, 2e-6, 1e-7, "da");
  }
}

TEST(SwiGlu, BackwardMatchesFiniteDifferences) {
  std::mt19937 g(71);
  for (const Shape s : {Shape{3, 19}, Shape{1, 37}}) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + ", f " + std::to_string(s.f));
    const int64_t rows = s.rows, f = s.f;
    Vec a = rand_rows(rows, f, g, 4.0f), c = randu(rows * f, g), y(rows * f);  // the functional: sum c·y
    auto fn = [&] {
      swiglu_forward(a.data(), y.data(), rows, f);
      return dot(c, y);
    };
    Vec da(rows * 2 * f);
    swiglu_backward(a.data(), c.data(), da.data(), rows, f);
    expect_grad(da, numeric_grad(a, fn, 1e-2f), 1e-3, "da");

    // da written over a itself: the same gradient
    Vec inplace = a;
    swiglu_backward(inplace.data(), c.data(), inplace.data(), rows, f);
    EXPECT_EQ(inplace, da) << "da over a";
  }
}

// Gates far out on both sides: sigmoid saturates without overflow, silu(g) = g and silu'(g) = 1 exactly
// for large positive g, and for large negative g both are tiny (to f32 precision, or 0 past -87).
TEST(SwiGlu, LargeGatesStayFiniteAndExact) {
  const Vec gates = {80.0f, -80.0f, 40.0f, -40.0f, 87.5f, -87.5f, 100.0f, -100.0f, 1e4f, -1e4f, 1e30f, -1e30f};
  const int64_t f = int64_t(gates.size()), rows = 2;
  std::mt19937 g(72);
  Vec a(rows * 2 * f), dy = randu(rows * f, g, 0.5f, 1.5f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < f; ++j) {
      a[r * 2 * f + j] = gates[j];
      a[r * 2 * f + f + j] = r == 0 ? 0.75f : -1.25f;
    }
  Vec y(rows * f), da(rows * 2 * f);
  swiglu_forward(a.data(), y.data(), rows, f);
  swiglu_backward(a.data(), dy.data(), da.data(), rows, f);
  for (float v : y) ASSERT_TRUE(std::isfinite(v)) << "y " << v;
  for (float v : da) ASSERT_TRUE(std::isfinite(v)) << "da " << v;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < f; ++j) {
      const float gt = gates[j], u = a[r * 2 * f + f + j], d = dy[r * f + j];
      SCOPED_TRACE("gate " + std::to_string(gt));
      if (gt > 0) {  // sigmoid is 1 in f32: the products of the inputs themselves
        EXPECT_EQ(y[r * f + j], gt * u);
        EXPECT_EQ(da[r * 2 * f + j], d * u);
        EXPECT_EQ(da[r * 2 * f + f + j], d * gt);
      } else {  // within f32 rounding of the double values; past -87 the CPU takes e^g as 0, so there
                // silu is -0 where the double value is below 2e-36 in absolute value
        const double ys = silu_ref(gt) * u, dg = d * u * silu_grad_ref(gt), du = d * silu_ref(gt);
        const double flush = gt < -87.0f ? 2e-36 : 0.0;
        EXPECT_NEAR(y[r * f + j], ys, 1e-6 * std::fabs(ys) + flush);
        EXPECT_NEAR(da[r * 2 * f + j], dg, 1e-6 * std::fabs(dg) + flush);
        EXPECT_NEAR(da[r * 2 * f + f + j], du, 1e-6 * std::fabs(du) + flush);
        if (gt == -80.0f) {
          EXPECT_NE(y[r * f + j], 0.0f) << "silu(-80) ≈ -1.4e-33 is a normal float, not flushed";
        }
      }
    }
}

TEST(SwiGlu, ThreadCountDoesNotChangeResults) {
  std::mt19937 g(73);
  const int64_t rows = 64, f = 77;
  Vec a = rand_rows(rows, f, g, 10.0f), dy = randu(rows * f, g);
  Vec y1(rows * f), y2(rows * f), da1(rows * 2 * f), da2(rows * 2 * f);
  {
    Threads t(1);
    swiglu_forward(a.data(), y1.data(), rows, f);
    swiglu_backward(a.data(), dy.data(), da1.data(), rows, f);
  }
  {
    Threads t(2);
    swiglu_forward(a.data(), y2.data(), rows, f);
    swiglu_backward(a.data(), dy.data(), da2.data(), rows, f);
  }
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(da1, da2);
}
