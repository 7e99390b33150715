// Unit tests for the CPU kernels: every forward against a naive double-precision reference, every
// backward against central finite differences, and the thread-count independence of masks and sums.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.hpp"
#include "kernels/cpu/activation.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/optimizer.hpp"
#include "kernels/cpu/reduce.hpp"

using namespace dtrain;

namespace {

using Vec = std::vector<float>;
using DVec = std::vector<double>;

Vec randu(size_t n, std::mt19937& g, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (auto& x : v) x = u(g);
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// Sets the OpenMP thread count for a scope.
struct Threads {
  int saved;
  explicit Threads(int n) : saved(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved); }
};

// |got - ref| <= atol + rtol * |ref| elementwise; reports the first few failures.
template <class A, class B>
void expect_close(const A& got, const B& ref, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), r = double(ref[i]);
    const double err = std::fabs(g - r), tol = atol + rtol * std::fabs(r);
    worst = std::max(worst, err / tol);
    if (!(err <= tol) && ++bad <= 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << g << ", want " << r << " (err " << err
                    << ", tol " << tol << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " out of tolerance";
}

double max_abs(const DVec& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Compares an analytic gradient with a numeric one: each element within rtol of itself or of the
// largest element of the tensor (so tiny entries are judged on the tensor's scale).
void expect_grad(const Vec& analytic, const DVec& numeric, double rtol, const std::string& what) {
  const double scale = max_abs(numeric);
  ASSERT_GT(scale, 0.0) << what << ": numeric gradient is all zero, the test checks nothing";
  expect_close(analytic, numeric, rtol, rtol * scale, what);
}

// Central differences of f at every element of x (x is restored). The step actually taken in f32
// is the denominator, so the only errors are rounding in f and the O(eps^2) truncation.
// Evaluated on one thread: hundreds of tiny parallel regions are slow on a loaded machine.
DVec numeric_grad(Vec& x, const std::function<double()>& f, float eps) {
  Threads one(1);
  DVec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float orig = x[i], hi = orig + eps, lo = orig - eps;
    x[i] = hi;
    const double fp = f();
    x[i] = lo;
    const double fm = f();
    x[i] = orig;
    g[i] = (fp - fm) / (double(hi) - double(lo));
  }
  return g;
}

// Naive double matmul: C[M,N] = op(A) op(B) (+ bias) as MatmulArgs describes.
DVec ref_matmul(const Vec& A, const Vec& B, const float* bias, int64_t M, int64_t N, int64_t K, bool ta,
                bool tb, bool round_bf16 = false) {
  auto rd = [&](float x) { return round_bf16 ? double(to_f32(to_bf16(x))) : double(x); };
  DVec C(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? double(bias[n]) : 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = rd(ta ? A[k * M + m] : A[m * K + k]);
        const double b = rd(tb ? B[n * K + k] : B[k * N + n]);
        s += a * b;
      }
      C[m * N + n] = s;
    }
  return C;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// matmul

TEST(Matmul, AllTransposeCombosMatchReference) {
  std::mt19937 g(1);
  const int64_t M = 7, N = 13, K = 19;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Vec A = randu(M * K, g), B = randu(K * N, g), C(M * N, 42.0f);
      matmul(A.data(), B.data(), C.data(), {M, N, K, bool(ta), bool(tb), false, nullptr, Precision::f32});
      expect_close(C, ref_matmul(A, B, nullptr, M, N, K, ta, tb), 1e-5, 1e-5,
                   "C ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
    }
}

TEST(Matmul, AccumulateAndBias) {
  std::mt19937 g(2);
  const int64_t M = 9, N = 6, K = 11;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const std::string tag = " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
      Vec A = randu(M * K, g), B = randu(K * N, g), bias = randu(N, g);
      // accumulate: C += op(A) op(B)
      Vec C0 = randu(M * N, g), C = C0;
      matmul(A.data(), B.data(), C.data(), {M, N, K, bool(ta), bool(tb), true, nullptr, Precision::f32});
      DVec ref = ref_matmul(A, B, nullptr, M, N, K, ta, tb);
      for (size_t i = 0; i < ref.size(); ++i) ref[i] += C0[i];
      expect_close(C, ref, 1e-5, 1e-5, "accumulate" + tag);
      // bias: C = op(A) op(B) + bias (old C ignored)
      Vec Cb(M * N, -7.0f);
      matmul(A.data(), B.data(), Cb.data(), {M, N, K, bool(ta), bool(tb), false, bias.data(), Precision::f32});
      expect_close(Cb, ref_matmul(A, B, bias.data(), M, N, K, ta, tb), 1e-5, 1e-5, "bias" + tag);
    }
}

TEST(Matmul, Bf16Precision) {
  std::mt19937 g(3);
  const int64_t M = 8, N = 24, K = 40;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const std::string tag = " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
      Vec A = randu(M * K, g), B = randu(K * N, g), bias = randu(N, g), C(M * N);
      matmul(A.data(), B.data(), C.data(), {M, N, K, bool(ta), bool(tb), false, bias.data(), Precision::bf16});
      // Against the exact product: bf16 input rounding (2^-9 relative) over K terms.
      const DVec exact = ref_matmul(A, B, bias.data(), M, N, K, ta, tb);
      expect_close(C, exact, 1e-2, 2e-2, "bf16 vs exact" + tag);
      // Where the CPU runs bf16 the precision is honoured: a different result from f32, equal to
      // the product of the bf16-rounded inputs accumulated in f32. (Elsewhere matmul may fall back
      // to f32, which the tolerance above admits.)
      if (!cpu_has_native_bf16()) continue;
      expect_close(C, ref_matmul(A, B, bias.data(), M, N, K, ta, tb, true), 1e-5, 1e-5,
                   "bf16 vs rounded inputs" + tag);
      Vec Cf(M * N);
      matmul(A.data(), B.data(), Cf.data(), {M, N, K, bool(ta), bool(tb), false, bias.data(), Precision::f32});
      double diff = 0;
      for (size_t i = 0; i < C.size(); ++i) diff = std::max(diff, double(std::fabs(C[i] - Cf[i])));
      EXPECT_GT(diff, 1e-5) << "bf16 result identical to f32" << tag;
    }
}

TEST(Matmul, Bf16Accumulate) {
  std::mt19937 g(4);
  const int64_t M = 5, N = 7, K = 33;
  Vec A = randu(M * K, g), B = randu(K * N, g), C0 = randu(M * N, g), C = C0;
  matmul(A.data(), B.data(), C.data(), {M, N, K, true, false, true, nullptr, Precision::bf16});
  DVec ref = ref_matmul(A, B, nullptr, M, N, K, true, false, cpu_has_native_bf16());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] += C0[i];
  // exact against the bf16-rounded inputs where bf16 runs; within bf16 rounding otherwise
  expect_close(C, ref, cpu_has_native_bf16() ? 1e-5 : 1e-2, cpu_has_native_bf16() ? 1e-5 : 2e-2,
               "bf16 accumulate");
}

// The Linear helpers: backward_input / backward_weight are the gradients of linear_forward.
TEST(Matmul, LinearBackwardMatchesFiniteDifferences) {
  std::mt19937 g(5);
  const int64_t rows = 6, in = 5, out = 4;
  Vec x = randu(rows * in, g), W = randu(out * in, g), b = randu(out, g), dy = randu(rows * out, g);
  Vec y(rows * out);
  auto f = [&] {
    linear_forward(x.data(), W.data(), b.data(), y.data(), rows, in, out, Precision::f32);
    return dot(dy, y);
  };
  f();
  DVec yref = ref_matmul(x, W, b.data(), rows, out, in, false, true);
  expect_close(y, yref, 1e-5, 1e-5, "linear y");

  Vec dx(rows * in, 99.0f), dW0 = randu(out * in, g), dW = dW0, db0 = randu(out, g), db = db0;
  linear_backward_input(dy.data(), W.data(), dx.data(), rows, in, out, false, Precision::f32);
  linear_backward_weight(dy.data(), x.data(), dW.data(), rows, in, out, Precision::f32);
  colsum_accumulate(dy.data(), db.data(), rows, out);
  for (size_t i = 0; i < dW.size(); ++i) dW[i] -= dW0[i];  // backward_weight accumulates
  for (size_t i = 0; i < db.size(); ++i) db[i] -= db0[i];
  expect_grad(dx, numeric_grad(x, f, 1e-2f), 1e-3, "dx");
  expect_grad(dW, numeric_grad(W, f, 1e-2f), 1e-3, "dW");
  expect_grad(db, numeric_grad(b, f, 1e-2f), 1e-3, "db");

  // accumulate=true adds to dx
  Vec dx_acc = randu(rows * in, g), dx_base = dx_acc;
  linear_backward_input(dy.data(), W.data(), dx_acc.data(), rows, in, out, true, Precision::f32);
  DVec want(dx.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = double(dx_base[i]) + dx[i];
  expect_close(dx_acc, want, 1e-5, 1e-5, "dx accumulate");
}

// ---------------------------------------------------------------------------------------------
// layernorm

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

// ---------------------------------------------------------------------------------------------
// dropout

TEST(Dropout, MaskKeepFractionAndIndependence) {
  DropoutSpec s;
  s.p = 0.1f;
  s.seed = 1234;
  s.step = 7;
  s.unit = 2;
  s.site = 3;
  const int64_t n = 200000;
  std::vector<uint8_t> keep(n);
  dropout_mask(s.stream(0), s.threshold(), 0, n, keep.data());
  int64_t kept = 0;
  for (auto k : keep) kept += k;
  EXPECT_NEAR(double(kept) / double(n), 0.9, 4e-3);  // 6 sigma

  // A window of the stream is the same as the corresponding slice of the whole.
  std::vector<uint8_t> part(1001);
  dropout_mask(s.stream(0), s.threshold(), 12345, 1001, part.data());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), keep.begin() + 12345));

  // Any change of key gives a different mask (agreement ≈ 0.82 for independent masks).
  auto agreement = [&](DropoutSpec o, int64_t sample) {
    std::vector<uint8_t> k2(n);
    dropout_mask(o.stream(sample), o.threshold(), 0, n, k2.data());
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i) same += keep[i] == k2[i];
    return double(same) / double(n);
  };
  DropoutSpec o = s;
  EXPECT_EQ(agreement(o, 0), 1.0);
  EXPECT_LT(agreement(o, 1), 0.9);
  o.seed = 1235;
  EXPECT_LT(agreement(o, 0), 0.9);
  o = s;
  o.step = 8;
  EXPECT_LT(agreement(o, 0), 0.9);
  o = s;
  o.unit = 3;
  EXPECT_LT(agreement(o, 0), 0.9);
  o = s;
  o.site = 4;
  EXPECT_LT(agreement(o, 0), 0.9);

  // p = 0.5
  s.p = 0.5f;
  dropout_mask(s.stream(3), s.threshold(), 0, n, keep.data());
  kept = 0;
  for (auto k : keep) kept += k;
  EXPECT_NEAR(double(kept) / double(n), 0.5, 7e-3);
}

TEST(Dropout, ForwardScalesKeptAndBackwardUsesSameMask) {
  std::mt19937 g(20);
  DropoutSpec s;
  s.p = 0.25f;
  s.seed = 99;
  s.step = 3;
  s.unit = 1;
  s.site = 2;
  s.sample_offset = 5;
  const int64_t samples = 3, per = 5000;  // more than one 4096-element chunk per sample
  Vec x = randu(samples * per, g), y(samples * per);
  dropout_forward(x.data(), y.data(), samples, per, s);
  EXPECT_NEAR(s.scale(), 1.0f / 0.75f, 1e-6f);
  std::vector<uint8_t> keep(per);
  int64_t kept = 0;
  for (int64_t b = 0; b < samples; ++b) {
    dropout_mask(s.stream(b), s.threshold(), 0, per, keep.data());
    for (int64_t i = 0; i < per; ++i) {
      const float want = keep[i] ? x[b * per + i] * s.scale() : 0.0f;
      ASSERT_EQ(y[b * per + i], want) << "sample " << b << " element " << i;
      kept += keep[i];
    }
  }
  EXPECT_NEAR(double(kept) / double(samples * per), 0.75, 0.02);

  // backward: dx = dy * mask * scale, in place
  Vec dy = randu(samples * per, g), dx = dy;
  dropout_backward(dx.data(), dx.data(), samples, per, s);
  for (int64_t i = 0; i < samples * per; ++i) {
    ASSERT_EQ(dx[i] == 0.0f, y[i] == 0.0f && x[i] != 0.0f) << i;
    if (y[i] != 0.0f) {
      ASSERT_EQ(dx[i], dy[i] * s.scale()) << i;
    }
  }

  // Rows [1, 3) of the batch, seen by a rank whose batch starts at global sample offset+1.
  DropoutSpec s2 = s;
  s2.sample_offset = s.sample_offset + 1;
  Vec y2(2 * per);
  dropout_forward(x.data() + per, y2.data(), 2, per, s2);
  EXPECT_TRUE(std::equal(y2.begin(), y2.end(), y.begin() + per));

  // Inactive dropout copies.
  DropoutSpec off;
  Vec z(samples * per);
  dropout_forward(x.data(), z.data(), samples, per, off);
  EXPECT_EQ(z, x);
}

TEST(Dropout, SameMaskForOneAndTwoThreads) {
  std::mt19937 g(21);
  DropoutSpec s;
  s.p = 0.1f;
  s.seed = 7;
  s.step = 11;
  const int64_t samples = 4, per = 9000;
  Vec x = randu(samples * per, g), y1(samples * per), y2(samples * per);
  {
    Threads t(1);
    dropout_forward(x.data(), y1.data(), samples, per, s);
  }
  {
    Threads t(2);
    dropout_forward(x.data(), y2.data(), samples, per, s);
  }
  EXPECT_EQ(y1, y2);
}

// ---------------------------------------------------------------------------------------------
// attention

namespace {
// Double reference of attention_forward with the kernel's dropout mask; probs before dropout.
void ref_attention(const Vec& qkv, const AttentionShape& s, const DropoutSpec& drop, DVec& out, DVec& probs) {
  const int64_t B = s.B, T = s.T, H = s.H, Dh = s.Dh, d = H * Dh, row = 3 * d;
  out.assign(B * T * d, 0.0);
  probs.assign(B * H * T * T, 0.0);
  std::vector<uint8_t> keep(T, 1);
  const double scale = 1.0 / std::sqrt(double(Dh));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = s.causal ? t + 1 : T;
        DVec sc(n);
        double mx = -1e300;
        for (int64_t j = 0; j < n; ++j) {
          double dd = 0;
          for (int64_t i = 0; i < Dh; ++i)
            dd += double(qkv[(b * T + t) * row + h * Dh + i]) * qkv[(b * T + j) * row + d + h * Dh + i];
          sc[j] = dd * scale;
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
        if (drop.active()) dropout_mask(drop.stream(b), drop.threshold(), (h * T + t) * T, T, keep.data());
        for (int64_t j = 0; j < n; ++j) {
          const double p = sc[j] / sum;
          probs[((b * H + h) * T + t) * T + j] = p;
          const double w = drop.active() ? (keep[j] ? p * double(drop.scale()) : 0.0) : p;
          for (int64_t i = 0; i < Dh; ++i)
            out[(b * T + t) * d + h * Dh + i] += w * qkv[(b * T + j) * row + 2 * d + h * Dh + i];
        }
      }
}

void check_attention(bool causal, const DropoutSpec& drop, uint32_t seed) {
  std::mt19937 g(seed);
  const AttentionShape s{2, 5, 2, 4, causal};
  const int64_t rows = s.B * s.T, d = s.H * s.Dh;
  Vec qkv = randu(rows * 3 * d, g, -1.5f, 1.5f), out(rows * d), probs(s.B * s.H * s.T * s.T, -1.0f);
  Vec dout = randu(rows * d, g);
  auto f = [&] {
    attention_forward(qkv.data(), out.data(), probs.data(), s, drop);
    return dot(dout, out);
  };
  f();
  DVec rout, rprobs;
  ref_attention(qkv, s, drop, rout, rprobs);
  expect_close(out, rout, 1e-5, 1e-6, "out");
  expect_close(probs, rprobs, 1e-5, 1e-7, "probs");

  Vec dqkv(rows * 3 * d, 55.0f);  // overwritten
  attention_backward(dout.data(), qkv.data(), probs.data(), dqkv.data(), s, drop);
  const DVec num = numeric_grad(qkv, f, 1e-2f);
  expect_grad(dqkv, num, 1e-3, "dqkv");
}

DropoutSpec attn_drop(float p) {
  DropoutSpec s;
  s.p = p;
  s.seed = 2024;
  s.step = 5;
  s.unit = 3;
  s.site = 1;
  s.sample_offset = 4;
  return s;
}
}  // namespace

TEST(Attention, CausalForwardBackward) { check_attention(true, DropoutSpec{}, 30); }
TEST(Attention, UnmaskedForwardBackward) { check_attention(false, DropoutSpec{}, 31); }
TEST(Attention, CausalWithDropout) { check_attention(true, attn_drop(0.3f), 32); }
TEST(Attention, UnmaskedWithDropout) { check_attention(false, attn_drop(0.3f), 33); }

// A causal row never looks ahead: changing the last position's k and v leaves earlier outputs alone.
TEST(Attention, CausalIgnoresFuture) {
  std::mt19937 g(34);
  const AttentionShape s{1, 6, 2, 3, true};
  const int64_t d = s.H * s.Dh;
  Vec qkv = randu(s.T * 3 * d, g), out1(s.T * d), out2(s.T * d), probs(s.H * s.T * s.T);
  attention_forward(qkv.data(), out1.data(), probs.data(), s, DropoutSpec{});
  for (int64_t i = d; i < 3 * d; ++i) qkv[(s.T - 1) * 3 * d + i] += 1.0f;
  attention_forward(qkv.data(), out2.data(), probs.data(), s, DropoutSpec{});
  EXPECT_TRUE(std::equal(out1.begin(), out1.end() - d, out2.begin()));
  EXPECT_FALSE(std::equal(out1.end() - d, out1.end(), out2.end() - d));
}

TEST(Attention, DropoutSameForOneAndTwoThreadsAndKeepFraction) {
  std::mt19937 g(35);
  const AttentionShape s{3, 16, 4, 8, true};
  const int64_t rows = s.B * s.T, d = s.H * s.Dh;
  const DropoutSpec drop = attn_drop(0.2f);
  Vec qkv = randu(rows * 3 * d, g), dout = randu(rows * d, g);
  Vec o1(rows * d), o2(rows * d), p1(s.B * s.H * s.T * s.T), p2(p1.size());
  Vec d1(rows * 3 * d), d2(rows * 3 * d);
  {
    Threads t(1);
    attention_forward(qkv.data(), o1.data(), p1.data(), s, drop);
    attention_backward(dout.data(), qkv.data(), p1.data(), d1.data(), s, drop);
  }
  {
    Threads t(2);
    attention_forward(qkv.data(), o2.data(), p2.data(), s, drop);
    attention_backward(dout.data(), qkv.data(), p2.data(), d2.data(), s, drop);
  }
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(d1, d2);
  // The masks the kernel uses (per sample, [H, T, T] elements) keep about 1 - p.
  std::vector<uint8_t> keep(s.H * s.T * s.T);
  int64_t kept = 0, total = 0;
  for (int64_t b = 0; b < s.B; ++b) {
    dropout_mask(drop.stream(b), drop.threshold(), 0, int64_t(keep.size()), keep.data());
    for (auto k : keep) kept += k;
    total += int64_t(keep.size());
  }
  EXPECT_NEAR(double(kept) / double(total), 0.8, 0.03);
  // and the output does depend on the mask
  Vec o3(rows * d);
  attention_forward(qkv.data(), o3.data(), p2.data(), s, DropoutSpec{});
  EXPECT_NE(o1, o3);
}

// ---------------------------------------------------------------------------------------------
// activations

namespace {
double gelu_ref(double x) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
double gelu_grad_ref(double x) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846), u = c * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}
}  // namespace

TEST(Activation, ReluForwardBackward) {
  std::mt19937 g(40);
  const int64_t n = 1000;
  Vec x = randu(n, g, -3.0f, 3.0f), y(n), dy = randu(n, g), dx(n);
  activation_forward(Activation::relu, x.data(), y.data(), n);
  activation_backward(Activation::relu, x.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f) << i;
    ASSERT_EQ(dx[i], x[i] > 0 ? dy[i] : 0.0f) << i;
  }
  // finite differences away from the kink
  Vec xs = randu(50, g, 0.1f, 2.0f);
  for (size_t i = 0; i < xs.size(); i += 2) xs[i] = -xs[i];
  Vec ys(50), dys = randu(50, g), dxs(50);
  auto f = [&] {
    activation_forward(Activation::relu, xs.data(), ys.data(), 50);
    return dot(dys, ys);
  };
  activation_backward(Activation::relu, xs.data(), dys.data(), dxs.data(), 50);
  expect_grad(dxs, numeric_grad(xs, f, 1e-2f), 1e-3, "relu dx");
}

TEST(Activation, GeluForwardBackward) {
  std::mt19937 g(41);
  const int64_t n = 2000;
  Vec x = randu(n, g, -6.0f, 6.0f);
  x[0] = 0.0f;
  x[1] = 30.0f;
  x[2] = -30.0f;
  x[3] = 1e-4f;
  Vec y(n), dy = randu(n, g), dx(n);
  activation_forward(Activation::gelu, x.data(), y.data(), n);
  activation_backward(Activation::gelu, x.data(), dy.data(), dx.data(), n);
  DVec ry(n), rdx(n);
  for (int64_t i = 0; i < n; ++i) {
    ry[i] = gelu_ref(x[i]);
    rdx[i] = dy[i] * gelu_grad_ref(x[i]);
  }
  expect_close(y, ry, 1e-5, 1e-6, "gelu y");
  // f32 cancellation in 1 - tanh^2 near the tails: ~1e-6 absolute on a derivative of scale 1
  expect_close(dx, rdx, 1e-5, 4e-6, "gelu dx");

  // finite differences of the f32 kernel; in-place backward (dx aliases dy)
  Vec xs = randu(64, g, -4.0f, 4.0f), ys(64), dys = randu(64, g), dxs = dys;
  auto f = [&] {
    activation_forward(Activation::gelu, xs.data(), ys.data(), 64);
    return dot(dys, ys);
  };
  activation_backward(Activation::gelu, xs.data(), dxs.data(), dxs.data(), 64);
  expect_grad(dxs, numeric_grad(xs, f, 1e-2f), 1e-3, "gelu dx fd");

  // in-place forward
  Vec xi = x;
  activation_forward(Activation::gelu, xi.data(), xi.data(), n);
  EXPECT_EQ(xi, y);
}

// ReLU backward from its saved, dropped-out output: the gradient of dropout(relu(x)).
TEST(Activation, ReluBackwardFromDroppedOutput) {
  std::mt19937 g(42);
  DropoutSpec s;
  s.p = 0.3f;
  s.seed = 5;
  s.step = 2;
  s.unit = 1;
  s.site = 3;
  const int64_t samples = 2, per = 60, n = samples * per;
  Vec x = randu(n, g, 0.05f, 2.0f);
  for (int64_t i = 0; i < n; i += 3) x[i] = -x[i];  // away from the kink
  Vec y(n), dy = randu(n, g), dx(n);
  auto fwd = [&] {
    activation_forward(Activation::relu, x.data(), y.data(), n);
    dropout_forward(y.data(), y.data(), samples, per, s);
  };
  fwd();
  int64_t neg_kept = 0, pos_dropped = 0;
  std::vector<uint8_t> keep(per);
  for (int64_t b = 0; b < samples; ++b) {
    dropout_mask(s.stream(b), s.threshold(), 0, per, keep.data());
    for (int64_t i = 0; i < per; ++i) {
      neg_kept += x[b * per + i] < 0 && keep[i];
      pos_dropped += x[b * per + i] > 0 && !keep[i];
    }
  }
  ASSERT_GT(neg_kept, 0);  // both cases that zero the gradient occur
  ASSERT_GT(pos_dropped, 0);
  Vec dxa = dy;  // in place
  relu_backward_from_output(y.data(), dxa.data(), dxa.data(), n, s.scale());
  auto f = [&] {
    fwd();
    return dot(dy, y);
  };
  expect_grad(dxa, numeric_grad(x, f, 1e-2f), 1e-3, "dx");
  // without dropout it is the plain ReLU backward
  activation_forward(Activation::relu, x.data(), y.data(), n);
  relu_backward_from_output(y.data(), dy.data(), dx.data(), n, 1.0f);
  Vec ref(n);
  activation_backward(Activation::relu, x.data(), dy.data(), ref.data(), n);
  EXPECT_EQ(dx, ref);
}

// ---------------------------------------------------------------------------------------------
// embedding

TEST(Embedding, SinusoidalTable) {
  const int64_t T = 9, d = 10;
  Vec P(T * d);
  sinusoidal_table(P.data(), T, d);
  DVec ref(T * d);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < d / 2; ++i) {
      const double a = double(t) / std::pow(10000.0, 2.0 * double(i) / double(d));
      ref[t * d + 2 * i] = std::sin(a);
      ref[t * d + 2 * i + 1] = std::cos(a);
    }
  expect_close(P, ref, 0.0, 1e-7, "P");
  EXPECT_EQ(P[0], 0.0f);
  EXPECT_EQ(P[1], 1.0f);
  EXPECT_NEAR(P[1 * d + 0], std::sin(1.0), 1e-7);
  EXPECT_NEAR(P[3 * d + 3], std::cos(3.0 / std::pow(10000.0, 2.0 / 10.0)), 1e-7);
}

TEST(Embedding, ForwardBackwardWithRepeatedTokens) {
  std::mt19937 g(50);
  const int64_t B = 3, T = 4, d = 40, V = 6;  // d spans two 32-column tiles
  std::vector<int32_t> tok = {1, 3, 1, 1, 5, 0, 3, 3, 1, 2, 2, 5};
  Vec wte = randu(V * d, g), pos = randu(T * d, g), out(B * T * d);
  embedding_forward(tok.data(), wte.data(), pos.data(), out.data(), B, T, d);
  DVec ref(B * T * d);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t i = 0; i < d; ++i) ref[r * d + i] = double(wte[tok[r] * d + i]) + pos[(r % T) * d + i];
  expect_close(out, ref, 1e-6, 0.0, "out");

  Vec dout = randu(B * T * d, g);
  Vec dwte0 = randu(V * d, g), dwte = dwte0, dpos0 = randu(T * d, g), dpos = dpos0;
  embedding_backward(tok.data(), dout.data(), dwte.data(), dpos.data(), B, T, d);
  for (size_t i = 0; i < dwte.size(); ++i) dwte[i] -= dwte0[i];  // accumulates
  for (size_t i = 0; i < dpos.size(); ++i) dpos[i] -= dpos0[i];
  auto f = [&] {
    embedding_forward(tok.data(), wte.data(), pos.data(), out.data(), B, T, d);
    return dot(dout, out);
  };
  const DVec nw = numeric_grad(wte, f, 1e-2f), np = numeric_grad(pos, f, 1e-2f);
  expect_grad(dwte, nw, 1e-4, "dwte");
  expect_grad(dpos, np, 1e-4, "dpos");
  for (int64_t i = 0; i < d; ++i) EXPECT_EQ(dwte[4 * d + i], 0.0f) << "token 4 is unused";

  // fixed positions: dpos null
  Vec dw2(V * d);
  embedding_backward(tok.data(), dout.data(), dw2.data(), nullptr, B, T, d);
  expect_close(dw2, nw, 1e-4, 1e-5, "dwte without dpos");
}

// ---------------------------------------------------------------------------------------------
// classifier + cross-entropy

namespace {
struct CeRef {
  double loss = 0;
  DVec per_row, dx, dW, db;
};
// Double reference: logits = x W^T + b, loss = sum of -log softmax[target], gradients of scale*loss.
CeRef ref_ce(const Vec& x, const Vec& W, const Vec* b, const std::vector<int32_t>& tgt, int64_t N,
             int64_t d, int64_t V, double scale) {
  CeRef r{0, DVec(N), DVec(N * d), DVec(V * d), DVec(V)};
  DVec l(V);
  for (int64_t n = 0; n < N; ++n) {
    double mx = -1e300;
    for (int64_t v = 0; v < V; ++v) {
      double s = b ? double((*b)[v]) : 0.0;
      for (int64_t k = 0; k < d; ++k) s += double(x[n * d + k]) * W[v * d + k];
      l[v] = s;
      mx = std::max(mx, s);
    }
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(l[v] - mx);
    const double lse = mx + std::log(sum);
    r.per_row[n] = lse - l[tgt[n]];
    r.loss += r.per_row[n];
    for (int64_t v = 0; v < V; ++v) {
      const double gl = scale * (std::exp(l[v] - lse) - (v == tgt[n] ? 1.0 : 0.0));
      r.db[v] += gl;
      for (int64_t k = 0; k < d; ++k) {
        r.dx[n * d + k] += gl * W[v * d + k];
        r.dW[v * d + k] += gl * x[n * d + k];
      }
    }
  }
  return r;
}

std::vector<int32_t> rand_targets(int64_t n, int64_t V, std::mt19937& g) {
  std::uniform_int_distribution<int32_t> u(0, int32_t(V - 1));
  std::vector<int32_t> t(n);
  for (auto& x : t) x = u(g);
  return t;
}
}  // namespace

TEST(CrossEntropy, LossAndGradientsMatchReferenceAndFiniteDifferences) {
  std::mt19937 g(60);
  const int64_t N = 6, d = 5, V = 7;
  const float scale = 1.0f / float(N);
  Vec x = randu(N * d, g, -2.0f, 2.0f), W = randu(V * d, g), bias = randu(V, g);
  auto tgt = rand_targets(N, V, g);
  const CeRef r = ref_ce(x, W, &bias, tgt, N, d, V, scale);

  Vec per_row(N);
  ClassifierArgs a{x.data(), W.data(), bias.data(), tgt.data(), N, d, V};
  const double loss = classifier_cross_entropy(a, per_row.data());
  EXPECT_NEAR(loss, r.loss, 1e-5 * r.loss);
  expect_close(per_row, r.per_row, 1e-5, 1e-6, "per_row");

  Vec dx(N * d, 31.0f), dW0 = randu(V * d, g), dW = dW0, db0 = randu(V, g), db = db0;
  ClassifierArgs t = a;
  t.grad_scale = scale;
  t.dx = dx.data();
  t.dW = dW.data();
  t.dbias = db.data();
  EXPECT_NEAR(classifier_cross_entropy(t), r.loss, 1e-5 * r.loss);
  for (size_t i = 0; i < dW.size(); ++i) dW[i] -= dW0[i];  // accumulated
  for (size_t i = 0; i < db.size(); ++i) db[i] -= db0[i];
  expect_close(dx, r.dx, 1e-4, 1e-6, "dx vs reference");
  expect_close(dW, r.dW, 1e-4, 1e-6, "dW vs reference");
  expect_close(db, r.db, 1e-4, 1e-6, "dbias vs reference");

  auto f = [&] { return double(scale) * classifier_cross_entropy(a); };
  expect_grad(dx, numeric_grad(x, f, 1e-2f), 1e-3, "dx fd");
  expect_grad(dW, numeric_grad(W, f, 1e-2f), 1e-3, "dW fd");
  expect_grad(db, numeric_grad(bias, f, 1e-2f), 1e-3, "dbias fd");

  // plain logits
  Vec logits(N * V);
  classifier_logits(x.data(), W.data(), bias.data(), logits.data(), N, d, V, Precision::f32);
  for (int64_t n = 0; n < N; ++n) {
    double mx = -1e300, s = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(logits[n * V + v]));
    for (int64_t v = 0; v < V; ++v) s += std::exp(logits[n * V + v] - mx);
    EXPECT_NEAR(mx + std::log(s) - logits[n * V + tgt[n]], r.per_row[n], 1e-5);
  }
}

TEST(CrossEntropy, NoBiasAndLargeLogits) {
  std::mt19937 g(61);
  const int64_t N = 4, d = 3, V = 9;
  Vec x = randu(N * d, g, -30.0f, 30.0f), W = randu(V * d, g);  // logits up to ~±100
  auto tgt = rand_targets(N, V, g);
  const CeRef r = ref_ce(x, W, nullptr, tgt, N, d, V, 0.5);
  Vec per_row(N), dx(N * d), dW(V * d);
  ClassifierArgs a{x.data(), W.data(), nullptr, tgt.data(), N, d, V};
  a.grad_scale = 0.5f;
  a.dx = dx.data();
  a.dW = dW.data();
  const double loss = classifier_cross_entropy(a, per_row.data());
  EXPECT_TRUE(std::isfinite(loss));
  expect_close(per_row, r.per_row, 1e-5, 1e-4, "per_row");
  expect_close(dx, r.dx, 1e-4, 1e-5, "dx");
  expect_close(dW, r.dW, 1e-4, 1e-5, "dW");
}

// More rows than one 512-row chunk: every chunk's loss, dx rows and dW/dbias contributions.
TEST(CrossEntropy, ChunkedRows) {
  std::mt19937 g(62);
  const int64_t N = 700, d = 6, V = 13;
  const float scale = 1.0f / float(N);
  Vec x = randu(N * d, g, -2.0f, 2.0f), W = randu(V * d, g), bias = randu(V, g);
  auto tgt = rand_targets(N, V, g);
  const CeRef r = ref_ce(x, W, &bias, tgt, N, d, V, scale);
  Vec per_row(N, -1.0f), dx(N * d), dW(V * d), db(V);
  ClassifierArgs a{x.data(), W.data(), bias.data(), tgt.data(), N, d, V};
  a.grad_scale = scale;
  a.dx = dx.data();
  a.dW = dW.data();
  a.dbias = db.data();
  const double loss = classifier_cross_entropy(a, per_row.data());
  EXPECT_NEAR(loss, r.loss, 1e-5 * r.loss);
  expect_close(per_row, r.per_row, 1e-5, 1e-6, "per_row");
  expect_close(dx, r.dx, 1e-4, 1e-7, "dx");
  expect_close(dW, r.dW, 1e-4, 1e-6, "dW");
  expect_close(db, r.db, 1e-4, 1e-6, "dbias");
  // evaluation (no gradient) over the same rows gives the same loss
  ClassifierArgs e{x.data(), W.data(), bias.data(), tgt.data(), N, d, V};
  EXPECT_NEAR(classifier_cross_entropy(e), loss, 1e-9 * loss);
}

// A zero gradient scale means zero gradients (not garbage from the unconverted logits).
TEST(CrossEntropy, ZeroGradScaleGivesZeroGradients) {
  std::mt19937 g(63);
  const int64_t N = 5, d = 4, V = 6;
  Vec x = randu(N * d, g), W = randu(V * d, g), bias = randu(V, g);
  auto tgt = rand_targets(N, V, g);
  Vec dx(N * d, 3.0f), dW(V * d), db(V);
  ClassifierArgs a{x.data(), W.data(), bias.data(), tgt.data(), N, d, V};
  a.grad_scale = 0.0f;
  a.dx = dx.data();
  a.dW = dW.data();
  a.dbias = db.data();
  const CeRef r = ref_ce(x, W, &bias, tgt, N, d, V, 0.0);
  EXPECT_NEAR(classifier_cross_entropy(a), r.loss, 1e-5 * r.loss);
  EXPECT_EQ(dx, Vec(N * d, 0.0f));
  EXPECT_EQ(dW, Vec(V * d, 0.0f));
  EXPECT_EQ(db, Vec(V, 0.0f));
}

TEST(CrossEntropy, Bf16Precision) {
  std::mt19937 g(64);
  const int64_t N = 20, d = 32, V = 17;
  Vec x = randu(N * d, g), W = randu(V * d, g), bias = randu(V, g);
  auto tgt = rand_targets(N, V, g);
  const CeRef r = ref_ce(x, W, &bias, tgt, N, d, V, 1.0 / N);
  Vec per_row(N), dx(N * d), dW(V * d), db(V);
  ClassifierArgs a{x.data(), W.data(), bias.data(), tgt.data(), N, d, V, Precision::bf16};
  a.grad_scale = 1.0f / float(N);
  a.dx = dx.data();
  a.dW = dW.data();
  a.dbias = db.data();
  EXPECT_NEAR(classifier_cross_entropy(a, per_row.data()), r.loss, 1e-2 * r.loss);
  expect_close(per_row, r.per_row, 1e-2, 2e-2, "per_row");
  const double sx = max_abs(r.dx), sw = max_abs(r.dW);
  expect_close(dx, r.dx, 2e-2, 2e-2 * sx, "dx");
  expect_close(dW, r.dW, 2e-2, 2e-2 * sw, "dW");
  expect_close(db, r.db, 1e-2, 1e-3, "dbias");
}

// ---------------------------------------------------------------------------------------------
// optimizers

TEST(Optimizer, AdamWMatchesTorchFormula) {
  std::mt19937 g(70);
  const int64_t n = 300;
  const AdamWHyper base{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0};
  Vec p = randu(n, g), m(n), v(n);
  DVec rp(p.begin(), p.end()), rm(n), rv(n);
  for (int64_t step = 1; step <= 6; ++step) {
    Vec gr = randu(n, g, -2.0f, 2.0f);
    if (step == 3) gr[0] = 0.0f;
    AdamWHyper h = base;
    h.step = step;
    adamw_update(p.data(), gr.data(), m.data(), v.data(), n, h);
    const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
    const double bc1 = 1.0 - std::pow(b1, double(step)), bc2 = 1.0 - std::pow(b2, double(step));
    for (int64_t i = 0; i < n; ++i) {
      rp[i] *= 1.0 - lr * wd;
      rm[i] = b1 * rm[i] + (1.0 - b1) * gr[i];
      rv[i] = b2 * rv[i] + (1.0 - b2) * double(gr[i]) * gr[i];
      rp[i] -= (lr / bc1) * rm[i] / (std::sqrt(rv[i]) / std::sqrt(bc2) + eps);
    }
    expect_close(m, rm, 1e-5, 1e-7, "m step " + std::to_string(step));
    expect_close(v, rv, 1e-5, 1e-7, "v step " + std::to_string(step));
    expect_close(p, rp, 1e-5, 2e-6, "p step " + std::to_string(step));
  }
}

TEST(Optimizer, AdamWFirstStepIsSignStep) {
  // Step 1: m/sqrt(v) after bias correction is sign(g), so p1 = p0 (1 - lr wd) - lr sign(g).
  Vec p = {1.0f, -2.0f, 0.5f}, gr = {0.3f, -4.0f, 1e-3f}, m(3), v(3);
  adamw_update(p.data(), gr.data(), m.data(), v.data(), 3, {0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1});
  EXPECT_NEAR(p[0], 1.0 * 0.999 - 0.1, 1e-6);
  EXPECT_NEAR(p[1], -2.0 * 0.999 + 0.1, 1e-6);
  EXPECT_NEAR(p[2], 0.5 * 0.999 - 0.1, 2e-5);
}

TEST(Optimizer, SgdMomentumMatchesTorchFormula) {
  std::mt19937 g(71);
  const int64_t n = 200;
  Vec p = randu(n, g), buf(n, 123.0f);  // first step ignores the old buffer
  DVec rp(p.begin(), p.end()), rb(n);
  for (int step = 0; step < 5; ++step) {
    Vec gr = randu(n, g);
    const SgdHyper h{0.05f, 0.9f, 0.01f, step == 0};
    sgd_update(p.data(), gr.data(), buf.data(), n, h);
    for (int64_t i = 0; i < n; ++i) {
      const double dd = double(gr[i]) + double(h.weight_decay) * rp[i];
      rb[i] = step == 0 ? dd : double(h.momentum) * rb[i] + dd;
      rp[i] -= double(h.lr) * rb[i];
    }
    expect_close(buf, rb, 1e-5, 1e-6, "buf step " + std::to_string(step));
    expect_close(p, rp, 1e-5, 1e-6, "p step " + std::to_string(step));
  }
  // plain SGD: no buffer needed
  Vec q = randu(n, g), gq = randu(n, g);
  DVec rq(n);
  for (int64_t i = 0; i < n; ++i) rq[i] = double(q[i]) - 0.1 * (double(gq[i]) + 0.0);
  sgd_update(q.data(), gq.data(), nullptr, n, {0.1f, 0.0f, 0.0f, true});
  expect_close(q, rq, 1e-6, 1e-7, "plain sgd");
}

// ---------------------------------------------------------------------------------------------
// reductions

TEST(Reduce, ColsumMatchesReferenceAndIsThreadCountIndependent) {
  std::mt19937 g(80);
  const int64_t rows = 1000, cols = 150;  // several row blocks and column tiles
  Vec x = randu(rows * cols, g), init = randu(cols, g);
  DVec ref(cols);
  for (int64_t c = 0; c < cols; ++c) {
    ref[c] = init[c];
    for (int64_t r = 0; r < rows; ++r) ref[c] += x[r * cols + c];
  }
  Vec o1 = init, o2 = init;
  {
    Threads t(1);
    colsum_accumulate(x.data(), o1.data(), rows, cols);
  }
  {
    Threads t(2);
    colsum_accumulate(x.data(), o2.data(), rows, cols);
  }
  expect_close(o1, ref, 1e-5, 1e-4, "colsum");
  EXPECT_EQ(o1, o2);
}

TEST(Reduce, SumDeterministicIsThreadCountIndependent) {
  std::mt19937 g(81);
  const int64_t n = 100003;  // several 16384-element blocks, ragged end
  Vec x = randu(n, g);
  double ref = 0, ref2 = 0;
  for (float v : x) {
    ref += v;
    ref2 += double(v) * v;
  }
  double s1, s2, q1, q2;
  {
    Threads t(1);
    s1 = sum_deterministic(x.data(), n);
    q1 = sumsq_deterministic(x.data(), n);
  }
  {
    Threads t(2);
    s2 = sum_deterministic(x.data(), n);
    q2 = sumsq_deterministic(x.data(), n);
  }
  EXPECT_NEAR(s1, ref, 1e-9 * n);
  EXPECT_NEAR(q1, ref2, 1e-9 * n);
  EXPECT_EQ(s1, s2);  // bit-identical
  EXPECT_EQ(q1, q2);

  Vec y = randu(n, g), y0 = y;
  add_inplace(y.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], y0[i] + x[i]);
}
