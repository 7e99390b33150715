// RMSNorm: forward against a double reference, backward against finite differences (with dx and dw
// accumulation), an analytic reference over many rows, and thread-count independence.
#include "kernel_test_util.hpp"
#include "kernels/cpu/rmsnorm.hpp"

namespace {
struct RmsRef {
  DVec y, rstd;
};
RmsRef ref_rmsnorm(const Vec& x, const Vec& w, int64_t rows, int64_t dim, double eps) {
  RmsRef r{DVec(rows * dim), DVec(rows)};
  for (int64_t i = 0; i < rows; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < dim; ++j) ss += double(x[i * dim + j]) * x[i * dim + j];
    const double rs = 1.0 / std::sqrt(ss / double(dim) + eps);
    for (int64_t j = 0; j < dim; ++j) r.y[i * dim + j] = x[i * dim + j] * rs * w[j];
    r.rstd[i] = rs;
  }
  return r;
}

// The analytic gradients in double: dx = rstd·(g - x̂·mean(g·x̂)) with g = dy·w, x̂ = x·rstd; dw = Σ dy·x̂.
void ref_rmsnorm_backward(const Vec& dy, const Vec& x, const Vec& w, int64_t rows, int64_t dim, double eps,
                          DVec& dx, DVec& dw) {
  const RmsRef r = ref_rmsnorm(x, w, rows, dim, eps);
  dx.assign(rows * dim, 0.0);
  dw.assign(dim, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    double sgx = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const double xh = x[i * dim + j] * r.rstd[i];
      sgx += double(dy[i * dim + j]) * w[j] * xh;
      dw[j] += dy[i * dim + j] * xh;
    }
    for (int64_t j = 0; j < dim; ++j) {
      const double xh = x[i * dim + j] * r.rstd[i];
      dx[i * dim + j] = (double(dy[i * dim + j]) * w[j] - xh * sgx / double(dim)) * r.rstd[i];
    }
  }
}

struct Shape {
  int64_t rows, dim;
};
}  // namespace

TEST(RmsNorm, ForwardMatchesReference) {
  std::mt19937 g(60);
  for (const Shape s : {Shape{1, 1}, Shape{1, 37}, Shape{9, 37}, Shape{4, 16}, Shape{3, 130}, Shape{70, 301}}) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + ", dim " + std::to_string(s.dim));
    Vec x = randu(s.rows * s.dim, g, -2.0f, 3.0f), w = randu(s.dim, g, 0.5f, 1.5f);
    Vec y(s.rows * s.dim, 77.0f), rstd(s.rows, 77.0f);
    rmsnorm_forward(x.data(), w.data(), y.data(), rstd.data(), s.rows, s.dim, 1e-5f);
    RmsRef r = ref_rmsnorm(x, w, s.rows, s.dim, 1e-5);
    expect_close(y, r.y, 1e-5, 1e-6, "y");
    expect_close(rstd, r.rstd, 1e-5, 1e-6, "rstd");
  }
}

// Inputs of the size of sqrt(eps): the eps inside the root changes rstd by orders of magnitude.
TEST(RmsNorm, ForwardSmallInputsSeeEps) {
  std::mt19937 g(61);
  const int64_t rows = 3, dim = 21;
  Vec x = randu(rows * dim, g, -2e-3f, 2e-3f), w = randu(dim, g, 0.5f, 1.5f), y(rows * dim), rstd(rows);
  for (const float eps : {1e-5f, 1e-6f}) {
    rmsnorm_forward(x.data(), w.data(), y.data(), rstd.data(), rows, dim, eps);
    RmsRef r = ref_rmsnorm(x, w, rows, dim, double(eps));
    expect_close(y, r.y, 1e-5, 1e-9, "y");
    expect_close(rstd, r.rstd, 1e-5, 0.0, "rstd");
  }
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  std::mt19937 g(62);
  for (const Shape s : {Shape{5, 19}, Shape{1, 37}, Shape{2, 16}}) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + ", dim " + std::to_string(s.dim));
    const int64_t rows = s.rows, dim = s.dim, n = rows * dim;
    Vec x = randu(n, g, -2.0f, 2.0f), w = randu(dim, g, 0.5f, 1.5f);
    Vec c = randu(n, g), y(n), rstd(rows);  // the functional: sum c·y
    auto f = [&] {
      rmsnorm_forward(x.data(), w.data(), y.data(), rstd.data(), rows, dim, 1e-5f);
      return dot(c, y);
    };
    f();
    Vec dx(n, 77.0f), dw0 = randu(dim, g), dw = dw0;
    rmsnorm_backward(c.data(), x.data(), w.data(), rstd.data(), dx.data(), dw.data(), rows, dim, false);
    for (int64_t i = 0; i < dim; ++i) dw[i] -= dw0[i];  // the weight's gradient is added to what dw held
    expect_grad(dx, numeric_grad(x, f, 1e-2f), 1e-3, "dx");
    expect_grad(dw, numeric_grad(w, f, 1e-2f), 1e-3, "dw");

    // accumulate_dx adds the same gradient to what dx holds; dw accumulates again
    f();
    Vec dx_acc = randu(n, g), base = dx_acc, dw2 = dw0;
    rmsnorm_backward(c.data(), x.data(), w.data(), rstd.data(), dx_acc.data(), dw2.data(), rows, dim, true);
    DVec want_dx(n), want_dw(dim);
    for (int64_t i = 0; i < n; ++i) want_dx[i] = double(base[i]) + dx[i];
    for (int64_t i = 0; i < dim; ++i) want_dw[i] = double(dw0[i]) + dw[i];
    expect_close(dx_acc, want_dx, 1e-6, 1e-6, "dx accumulate");
    expect_close(dw2, want_dw, 1e-6, 1e-6, "dw (second call)");

    // dx written over dy (the contract allows it when not accumulating): the same gradients
    Vec inplace = c, dw3(dim, 0.0f);
    rmsnorm_backward(inplace.data(), x.data(), w.data(), rstd.data(), inplace.data(), dw3.data(), rows, dim, false);
    EXPECT_EQ(inplace, dx) << "dx over dy";
    expect_close(dw3, dw, 1e-6, 1e-6, "dw with dx over dy");
  }
}

// Many rows (three 256-row blocks, the last partial): the analytic double reference, and the same
// bits for 1 and 2 threads.
TEST(RmsNorm, BackwardManyRowsDeterministic) {
  std::mt19937 g(63);
  const int64_t rows = 600, dim = 40, n = rows * dim;
  Vec x = randu(n, g, -2.0f, 2.0f), w = randu(dim, g, 0.5f, 1.5f), dy = randu(n, g), y(n), rstd(rows);
  rmsnorm_forward(x.data(), w.data(), y.data(), rstd.data(), rows, dim, 1e-5f);
  DVec rdx, rdw;
  ref_rmsnorm_backward(dy, x, w, rows, dim, 1e-5, rdx, rdw);
  Vec dx1(n), dw1(dim), dx2(n), dw2(dim);
  {
    Threads t(1);
    rmsnorm_backward(dy.data(), x.data(), w.data(), rstd.data(), dx1.data(), dw1.data(), rows, dim, false);
  }
  {
    Threads t(2);
    rmsnorm_backward(dy.data(), x.data(), w.data(), rstd.data(), dx2.data(), dw2.data(), rows, dim, false);
  }
  expect_close(dx1, rdx, 1e-4, 1e-5, "dx");
  expect_close(dw1, rdw, 1e-4, 1e-4, "dw");
  EXPECT_EQ(dx1, dx2);
  EXPECT_EQ(dw1, dw2);
  // and the forward, row by row
  Vec y2(n), rstd2(rows);
  {
    Threads t(1);
    rmsnorm_forward(x.data(), w.data(), y2.data(), rstd2.data(), rows, dim, 1e-5f);
  }
  EXPECT_EQ(y, y2);
  EXPECT_EQ(rstd, rstd2);
}
