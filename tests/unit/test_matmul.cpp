// Matmul: all transpose combinations, accumulate, bias and bf16 against a double reference; ReLU in the product; Linear backward against finite differences, and its fused form against its two products; the CPU device's kernel profile.
#include "bf16_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/cpu/op_profile.hpp"
#include "kernels/device.hpp"  // cpu_has_native_bf16

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

// The CPU device's kernel profile (DTRAIN_PROFILE=1): time, FLOPs and calls summed per name, largest
// first, emptied by each take; not asked for, it records nothing.
// linear_backward (dy rounded to bf16 once for both products) gives the two products' bits exactly, in
// f32 and bf16, writing dx or adding to it.
TEST(Matmul, LinearBackwardIsItsTwoProductsToTheBit) {
  std::mt19937 g(5);
  const int64_t rows = 37, in = 24, out = 40;
  const Vec x = randu(rows * in, g), dy = randu(rows * out, g), W = randu(out * in, g), dW0 = randu(out * in, g),
            dx0 = randu(rows * in, g);
  for (Precision p : {Precision::f32, Precision::bf16})
    for (bool accumulate : {false, true}) {
      Vec dW1 = dW0, dx1 = dx0, dW2 = dW0, dx2 = dx0;
      linear_backward_weight(dy.data(), x.data(), dW1.data(), rows, in, out, p);
      linear_backward_input(dy.data(), W.data(), dx1.data(), rows, in, out, accumulate, p);
      linear_backward(x.data(), dy.data(), W.data(), dW2.data(), dx2.data(), rows, in, out, accumulate, p);
      EXPECT_EQ(dW2, dW1) << (p == Precision::bf16 ? "bf16" : "f32") << " accumulate " << accumulate;
      EXPECT_EQ(dx2, dx1) << (p == Precision::bf16 ? "bf16" : "f32") << " accumulate " << accumulate;
      EXPECT_NE(dW2, dW0);
    }
}

// relu: the product's own pass gives ReLU of the product plus bias to the bit, in f32 and bf16, with
// operands given in f32 or in bf16 (some products negative, so the ReLU has work to do).
TEST(Matmul, ReluInTheProductIsReluOfTheProduct) {
  std::mt19937 g(6);
  const int64_t M = 33, N = 40, K = 24;
  const Vec A = randu(M * K, g), B = randu(N * K, g), bias = randu(N, g);
  const std::vector<uint16_t> A16 = rounded(A), B16 = rounded(B);
  for (Precision p : {Precision::f32, Precision::bf16})
    for (bool given_bf16 : {false, true}) {
      SCOPED_TRACE(std::string(p == Precision::bf16 ? "bf16" : "f32") + (given_bf16 ? ", bf16 operands" : ""));
      const Operand a = given_bf16 ? Operand(A16.data()) : Operand(A.data());
      const Operand b = given_bf16 ? Operand(B16.data()) : Operand(B.data());
      MatmulArgs args = linear_forward_args(M, K, N, bias.data(), p);
      Vec want(M * N), got(M * N, 7.0f);
      matmul(a, b, want.data(), args);
      int64_t negative = 0;
      for (float& v : want) {
        negative += v < 0.0f;
        v = v > 0.0f ? v : 0.0f;
      }
      args.relu = true;
      matmul(a, b, got.data(), args);
      ASSERT_GT(negative, M * N / 10);
      for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;  // (-0 == 0)
    }
}

TEST(HostOpProfile, SumsTimeFlopsAndCallsPerNameWhenAsked) {
  setenv("DTRAIN_PROFILE", "1", 1);
  HostOpProfile prof;
  setenv("DTRAIN_PROFILE", "0", 1);
  HostOpProfile off;
  unsetenv("DTRAIN_PROFILE");
  ASSERT_TRUE(prof.on());
  ASSERT_FALSE(off.on());
  const int64_t n = 96;
  std::vector<float> A(n * n, 0.5f), B(n * n, 0.25f), C(n * n);
  const MatmulArgs a{n, n, n};
  for (int i = 0; i < 3; ++i) {
    HostOpProfile::Scope s(prof, "matmul", matmul_flops(a));
    HostOpProfile::Scope t(off, "matmul", matmul_flops(a));
    matmul(A.data(), B.data(), C.data(), a);
  }
  { HostOpProfile::Scope s(prof, "zero"); }
  const std::vector<OpTime> ops = prof.take();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].name, "matmul");  // three products take longer than an empty scope
  EXPECT_EQ(ops[0].calls, 3);
  EXPECT_DOUBLE_EQ(ops[0].flops, 3 * 2.0 * n * n * n);
  EXPECT_GT(ops[0].seconds, ops[1].seconds);
  EXPECT_EQ(ops[1].name, "zero");
  EXPECT_EQ(ops[1].calls, 1);
  EXPECT_TRUE(prof.take().empty());
  EXPECT_TRUE(off.take().empty());
}
