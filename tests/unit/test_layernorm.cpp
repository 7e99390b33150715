// LayerNorm: forward against a double reference, backward against finite differences, thread-count independence.
#include "kernel_test_util.hpp"

namespace {
struct LnRef {
  DVec y, mean, rstd;
};
LnRef ref_layernorm(const Vec& x, const Vec& gm, const Vec& bt, int64_t rows, int64_t dim, double eps) {
  LnRef r{DVec(rows * dim), DVec(rows), DVec(rows)};
  for (int64_t i = 0; i < rows; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < dim; ++j) m += x[i * dim + j];
    m /= double(dim);
    for (int64_t j = 0; j < dim; ++j) v += (x[i * dim + j] - m) * (x[i * dim + j] - m);
    v /= double(dim);
    const double rs = 1.0 / std::sqrt(v + eps);
    for (int64_t j = 0; j < dim; ++j) r.y[i * dim + j] = (x[i * dim + j] - m) * rs * gm[j] + bt[j];
    r.mean[i] = m;
    r.rstd[i] = rs;
  }
  return r;
}
}  // namespace

TEST(LayerNorm, ForwardMatchesReference) {
  std::mt19937 g(10);
  const int64_t rows = 9, dim = 37;
  Vec x = randu(rows * dim, g, -2.0f, 3.0f), gm = randu(dim, g, 0.5f, 1.5f), bt = randu(dim, g);
  Vec y(rows * dim), mean(rows), rstd(rows);
  layernorm_forward(x.data(), gm.data(), bt.data(), y.data(), mean.data(), rstd.data(), rows, dim, 1e-5f);
  LnRef r = ref_layernorm(x, gm, bt, rows, dim, 1e-5);
  expect_close(y, r.y, 1e-5, 1e-5, "y");
  expect_close(mean, r.mean, 1e-5, 1e-6, "mean");
  expect_close(rstd, r.rstd, 1e-5, 1e-6, "rstd");
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  std::mt19937 g(11);
  const int64_t rows = 5, dim = 16;
  Vec x = randu(rows * dim, g, -2.0f, 2.0f), gm = randu(dim, g, 0.5f, 1.5f), bt = randu(dim, g);
  Vec dy = randu(rows * dim, g), y(rows * dim), mean(rows), rstd(rows);
  auto f = [&] {
    layernorm_forward(x.data(), gm.data(), bt.data(), y.data(), mean.data(), rstd.data(), rows, dim, 1e-5f);
    return dot(dy, y);
  };
  f();
  Vec dx(rows * dim, 77.0f), dg0 = randu(dim, g), dg = dg0, db0 = randu(dim, g), db = db0;
  layernorm_backward(dy.data(), x.data(), gm.data(), mean.data(), rstd.data(), dx.data(), dg.data(),
                     db.data(), rows, dim, false);
  for (int64_t i = 0; i < dim; ++i) {  // parameter gradients accumulate
    dg[i] -= dg0[i];
    db[i] -= db0[i];
  }
  expect_grad(dx, numeric_grad(x, f, 1e-2f), 1e-3, "dx");
  expect_grad(dg, numeric_grad(gm, f, 1e-2f), 1e-3, "dgamma");
  expect_grad(db, numeric_grad(bt, f, 1e-2f), 1e-3, "dbeta");

  // accumulate_dx adds the same gradient to what dx holds
  f();
  Vec dx_acc = randu(rows * dim, g), base = dx_acc, dg2(dim), db2(dim);
  layernorm_backward(dy.data(), x.data(), gm.data(), mean.data(), rstd.data(), dx_acc.data(), dg2.data(),
                     db2.data(), rows, dim, true);
  DVec want(dx.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = double(base[i]) + dx[i];
  expect_close(dx_acc, want, 1e-6, 1e-6, "dx accumulate");
  expect_close(dg2, dg, 1e-5, 1e-6, "dgamma (second call)");
}

// Many rows (several 256-row blocks): analytic double reference, and the same bits for 1 and 2 threads.
TEST(LayerNorm, BackwardManyRowsDeterministic) {
  std::mt19937 g(12);
  const int64_t rows = 600, dim = 24;
  Vec x = randu(rows * dim, g, -2.0f, 2.0f), gm = randu(dim, g, 0.5f, 1.5f), bt = randu(dim, g);
  Vec dy = randu(rows * dim, g), y(rows * dim), mean(rows), rstd(rows);
  layernorm_forward(x.data(), gm.data(), bt.data(), y.data(), mean.data(), rstd.data(), rows, dim, 1e-5f);
  LnRef r = ref_layernorm(x, gm, bt, rows, dim, 1e-5);
  DVec rdx(rows * dim), rdg(dim), rdb(dim);
  for (int64_t i = 0; i < rows; ++i) {
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const double xh = (x[i * dim + j] - r.mean[i]) * r.rstd[i], gg = double(dy[i * dim + j]) * gm[j];
      sg += gg;
      sgx += gg * xh;
      rdg[j] += dy[i * dim + j] * xh;
      rdb[j] += dy[i * dim + j];
    }
    for (int64_t j = 0; j < dim; ++j) {
      const double xh = (x[i * dim + j] - r.mean[i]) * r.rstd[i];
      rdx[i * dim + j] = (double(dy[i * dim + j]) * gm[j] - sg / dim - xh * sgx / dim) * r.rstd[i];
    }
  }
  Vec dx1(rows * dim), dg1(dim), db1(dim), dx2(rows * dim), dg2(dim), db2(dim);
  {
    Threads t(1);
    layernorm_backward(dy.data(), x.data(), gm.data(), mean.data(), rstd.data(), dx1.data(), dg1.data(),
                       db1.data(), rows, dim, false);
  }
  {
    Threads t(2);
    layernorm_backward(dy.data(), x.data(), gm.data(), mean.data(), rstd.data(), dx2.data(), dg2.data(),
                       db2.data(), rows, dim, false);
  }
  expect_close(dx1, rdx, 1e-4, 1e-5, "dx");
  expect_close(dg1, rdg, 1e-4, 1e-4, "dgamma");
  expect_close(db1, rdb, 1e-4, 1e-4, "dbeta");
  EXPECT_EQ(dx1, dx2);
  EXPECT_EQ(dg1, dg2);
  EXPECT_EQ(db1, db2);
}
