// Shared helpers of the kernel unit tests: random inputs, double-precision references, closeness
// and finite-difference checks.
#pragma once
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

namespace kernel_test {


using Vec = std::vector<float>;
using DVec = std::vector<double>;

inline Vec randu(size_t n, std::mt19937& g, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (auto& x : v) x = u(g);
  return v;
}

inline double dot(const Vec& a, const Vec& b) {
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
inline void expect_close(const A& got, const B& ref, double rtol, double atol, const std::string& what) {
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

inline double max_abs(const DVec& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Compares an analytic gradient with a numeric one: each element within rtol of itself or of the
// largest element of the tensor (so tiny entries are judged on the tensor's scale).
inline void expect_grad(const Vec& analytic, const DVec& numeric, double rtol, const std::string& what) {
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
inline DVec ref_matmul(const Vec& A, const Vec& B, const float* bias, int64_t M, int64_t N, int64_t K, bool ta,
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

}  // namespace kernel_test

using namespace kernel_test;
