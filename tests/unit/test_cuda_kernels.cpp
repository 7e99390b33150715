// Every CUDA kernel against the CPU implementation through the one ComputeDevice interface: f32
// within a few ulps of accumulated rounding, bf16 within bf16 tolerance, dropout masks identical.
// Without a GPU each test reports itself skipped; the build check runs everywhere.
#include <algorithm>
#include <filesystem>
#include <random>

#include "gpu_test_util.hpp"
#include "kernels/cpu/reduce.hpp"
#include "models/transformer/workspace.hpp"
#include "nn/context.hpp"

using namespace dtrain;
using gpu_test::expect_close;
using gpu_test::OnDevice;
using gpu_test::rand_vec;

namespace {

DropoutSpec spec(float p, uint32_t unit, uint32_t site) {
  DropoutSpec s;
  s.p = p;
  s.seed = 1234567890123ull;
  s.step = 7;
  s.unit = unit;
  s.site = site;
  s.sample_offset = 3;
  s.sample_stride = 2;
  return s;
}

}  // namespace

TEST(CudaBuild, BackendIsBuiltWhenTheToolkitIsPresent) {
  // CI compiles the CUDA code whenever nvcc is there, so it cannot rot unnoticed.
  if (std::string(DTRAIN_CUDA_SETTING) == "OFF") GTEST_SKIP() << "configured with -DDTRAIN_CUDA=OFF";
  if (!std::filesystem::exists("/usr/local/cuda/bin/nvcc")) GTEST_SKIP() << "no CUDA toolkit on this machine";
  EXPECT_TRUE(cuda_built()) << "the CUDA toolkit is installed but this build left the CUDA backend out";
}

TEST(CudaKernels, MatmulEveryLayoutF32AndBf16) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t M = 37, N = 53, K = 129;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int mode = 0; mode < 4; ++mode)  // plain, bias, accumulate, bias then ReLU
        for (Precision p : {Precision::f32, Precision::bf16}) {
          const auto A = rand_vec(M * K, 1), B = rand_vec(K * N, 2), bias = rand_vec(N, 3), C0 = rand_vec(M * N, 4);
          MatmulArgs a{M, N, K, bool(ta), bool(tb), mode == 2, nullptr, p, mode == 3};
          auto ref = C0;
          a.bias = mode == 1 || mode == 3 ? bias.data() : nullptr;
          C.matmul(A.data(), B.data(), ref.data(), a);
          OnDevice<float> dA(G, A), dB(G, B), dbias(G, bias), dC(G, C0);
          a.bias = mode == 1 || mode == 3 ? dbias.p() : nullptr;
          G.matmul(dA.p(), dB.p(), dC.p(), a);
          expect_close(ref, dC.host(), p == Precision::f32 ? 1e-5 : 2e-2,
                       "matmul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " mode=" +
                           std::to_string(mode) + (p == Precision::f32 ? " f32" : " bf16"));
        }
}

TEST(CudaKernels, LayerNormForwardAndBackward) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t rows = 300, dim = 200;
  const auto x = rand_vec(rows * dim, 5, -3, 3), g = rand_vec(dim, 6), b = rand_vec(dim, 7), dy = rand_vec(rows * dim, 8);
  std::vector<float> y(rows * dim), mean(rows), rstd(rows), dx = rand_vec(rows * dim, 9), dg(dim, 0.5f), db(dim, 0.25f);
  OnDevice<float> X(G, x), Gm(G, g), Bt(G, b), Y(G, y), Mn(G, mean), Rs(G, rstd), DY(G, dy), DX(G, dx), DG(G, dg), DB(G, db);
  C.layernorm_forward(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), rows, dim, 1e-5f);
  G.layernorm_forward(X.p(), Gm.p(), Bt.p(), Y.p(), Mn.p(), Rs.p(), rows, dim, 1e-5f);
  expect_close(y, Y.host(), 1e-5, "layernorm y");
  expect_close(rstd, Rs.host(), 1e-5, "layernorm rstd");
  C.layernorm_backward(dy.data(), x.data(), g.data(), mean.data(), rstd.data(), dx.data(), dg.data(), db.data(), rows,
                       dim, true);
  G.layernorm_backward(DY.p(), X.p(), Gm.p(), Mn.p(), Rs.p(), DX.p(), DG.p(), DB.p(), rows, dim, true);
  expect_close(dx, DX.host(), 1e-5, "layernorm dx (accumulated)");
  expect_close(dg, DG.host(), 1e-5, "layernorm dgamma");
  expect_close(db, DB.host(), 1e-5, "layernorm dbeta");
}

TEST(CudaKernels, RmsNormForwardAndBackward) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  struct Shape {
    int64_t rows, dim;
  };
  // several row blocks of both devices (256 on the CPU, 128 on the GPU), and one row of an odd width
  for (const Shape sh : {Shape{300, 200}, Shape{1, 37}})
    for (bool acc : {true, false}) {
      const int64_t rows = sh.rows, dim = sh.dim, n = rows * dim;
      SCOPED_TRACE("rows " + std::to_string(rows) + ", dim " + std::to_string(dim) + (acc ? ", dx accumulated" : ""));
      const auto x = rand_vec(n, 30, -3, 3), w = rand_vec(dim, 31, 0.5f, 1.5f), dy = rand_vec(n, 32);
      std::vector<float> y(n), rstd(rows), dx = rand_vec(n, 33), dw(dim, 0.5f);
      OnDevice<float> X(G, x), W(G, w), Y(G, y), Rs(G, rstd), DY(G, dy), DX(G, dx), DW(G, dw);
      C.rmsnorm_forward(x.data(), w.data(), y.data(), rstd.data(), rows, dim, 1e-5f);
      G.rmsnorm_forward(X.p(), W.p(), Y.p(), Rs.p(), rows, dim, 1e-5f);
      expect_close(y, Y.host(), 1e-5, "rmsnorm y");
      expect_close(rstd, Rs.host(), 1e-5, "rmsnorm rstd");
      C.rmsnorm_backward(dy.data(), x.data(), w.data(), rstd.data(), dx.data(), dw.data(), rows, dim, acc);
      G.rmsnorm_backward(DY.p(), X.p(), W.p(), Rs.p(), DX.p(), DW.p(), rows, dim, acc);
      expect_close(dx, DX.host(), 1e-5, "rmsnorm dx");
      expect_close(dw, DW.host(), 1e-5, "rmsnorm dw (accumulated)");
      if (acc) continue;
      // dx written over dy: the same dx, and dw (read from dy before dx is written) unchanged
      std::vector<float> dw2(dim, 0.5f);
      OnDevice<float> DYX(G, dy), DW2(G, dw2);
      G.rmsnorm_backward(DYX.p(), X.p(), W.p(), Rs.p(), DYX.p(), DW2.p(), rows, dim, false);
      expect_close(DX.host(), DYX.host(), 0.0, "rmsnorm dx over dy");
      expect_close(DW.host(), DW2.host(), 0.0, "rmsnorm dw with dx over dy");
    }
}

TEST(CudaKernels, ActivationsForwardAndBackward) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t n = 10007;
  const auto x = rand_vec(n, 10, -4, 4), dy = rand_vec(n, 11);
  for (Activation a : {Activation::relu, Activation::gelu}) {
    std::vector<float> y(n), dx(n);
    OnDevice<float> X(G, x), Y(G, y), DY(G, dy), DX(G, dx);
    C.activation_forward(a, x.data(), y.data(), n);
    G.activation_forward(a, X.p(), Y.p(), n);
    expect_close(y, Y.host(), 2e-6, "activation forward");
    C.activation_backward(a, x.data(), dy.data(), dx.data(), n);
    G.activation_backward(a, X.p(), DY.p(), DX.p(), n);
    expect_close(dx, DX.host(), 2e-6, "activation backward");
  }
  std::vector<float> r(n), dr(n);
  C.activation_forward(Activation::relu, x.data(), r.data(), n);
  OnDevice<float> R(G, r), DY(G, dy), DR(G, dr);
  C.relu_backward_from_output(r.data(), dy.data(), dr.data(), n, 1.25f);
  G.relu_backward_from_output(R.p(), DY.p(), DR.p(), n, 1.25f);
  expect_close(dr, DR.host(), 0.0, "relu backward from output");
}

TEST(CudaKernels, SwiGluForwardAndBackward) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t rows = 97, f = 301;  // rows·f not a multiple of the block
  auto a = rand_vec(rows * 2 * f, 34, -10, 10);
  // gates far out on both sides (row 0), where the sigmoid saturates
  const float far[] = {80.0f, -80.0f, 100.0f, -100.0f, 1e30f, -1e30f, 0.0f};
  for (size_t j = 0; j < sizeof(far) / sizeof(far[0]); ++j) a[j] = far[j];
  const auto dy = rand_vec(rows * f, 35);
  std::vector<float> y(rows * f), da(rows * 2 * f, 7.0f);
  OnDevice<float> A(G, a), Y(G, y), DY(G, dy), DA(G, da);
  C.swiglu_forward(a.data(), y.data(), rows, f);
  G.swiglu_forward(A.p(), Y.p(), rows, f);
  const auto gy = Y.host();
  expect_close(y, gy, 2e-6, "swiglu y");
  C.swiglu_backward(a.data(), dy.data(), da.data(), rows, f);
  G.swiglu_backward(A.p(), DY.p(), DA.p(), rows, f);
  const auto gda = DA.host();
  expect_close(da, gda, 2e-6, "swiglu da");
  for (size_t i = 0; i < gy.size(); ++i) ASSERT_TRUE(std::isfinite(gy[i])) << "swiglu y " << i;
  for (size_t i = 0; i < gda.size(); ++i) ASSERT_TRUE(std::isfinite(gda[i])) << "swiglu da " << i;
  // da written over a itself
  G.swiglu_backward(A.p(), DY.p(), A.p(), rows, f);
  expect_close(gda, A.host(), 0.0, "swiglu da over a");
}

TEST(CudaKernels, DropoutDrawsTheCpuMasks) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t samples = 5, per = 4099;  // not a multiple of 8: partial Philox blocks
  const auto x = rand_vec(samples * per, 12, 0.5f, 1.0f);
  std::vector<float> y(x.size());
  OnDevice<float> X(G, x), Y(G, y);
  const DropoutSpec s = spec(0.3f, 4, kDropFfAct);
  C.dropout_forward(x.data(), y.data(), samples, per, s);
  G.dropout_forward(X.p(), Y.p(), samples, per, s);
  const auto got = Y.host();
  int64_t dropped = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(y[i] == 0.0f, got[i] == 0.0f) << "mask differs at element " << i;
    dropped += y[i] == 0.0f;
  }
  EXPECT_NEAR(double(dropped) / double(y.size()), 0.3, 0.02);
  expect_close(y, got, 0.0, "dropout values");
  // a tensor- and sequence-parallel tile: rows 13.. of [samples·T, 2·cols], the second half of the columns
  DropoutSpec tile = s;
  tile.rows_per_sample = 7;
  tile.row_offset = 13;
  tile.global_cols = 2 * 301;
  tile.col_offset = 301;
  std::vector<float> ty(size_t(11 * 301));
  OnDevice<float> TY(G, ty);
  C.dropout_forward(x.data(), ty.data(), 11, 301, tile);
  G.dropout_forward(X.p(), TY.p(), 11, 301, tile);
  expect_close(ty, TY.host(), 0.0, "dropout tile values");
}

TEST(CudaKernels, AttentionForwardAndBackwardWithDropout) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  for (bool causal : {true, false})
    for (Precision p : {Precision::f32, Precision::bf16}) {
      const AttentionShape s{3, 17, 4, 8, causal, p};
      const int64_t d = s.H * s.Dh, rows = s.B * s.T, np = s.B * s.H * s.T * s.T;
      const auto qkv = rand_vec(rows * 3 * d, 13), dout = rand_vec(rows * d, 14);
      std::vector<float> out(rows * d), probs(np), dqkv(rows * 3 * d);
      OnDevice<float> QKV(G, qkv), OUT(G, out), P(G, probs), DOUT(G, dout), DQKV(G, dqkv);
      const DropoutSpec drop = spec(0.2f, 2, kDropAttnProbs);
      AttentionShape cpu_shape = s;
      cpu_shape.precision = Precision::f32;  // the reference: f32 products
      C.attention_forward(qkv.data(), out.data(), probs.data(), cpu_shape, drop);
      G.attention_forward(QKV.p(), OUT.p(), P.p(), s, drop);
      const double tol = p == Precision::f32 ? 1e-5 : 2e-2;
      const std::string what = std::string(causal ? "causal" : "full") + (p == Precision::f32 ? " f32" : " bf16");
      expect_close(probs, P.host(), tol, "attention probs " + what);
      expect_close(out, OUT.host(), tol, "attention out " + what);
      C.attention_backward(dout.data(), qkv.data(), probs.data(), dqkv.data(), cpu_shape, drop);
      G.attention_backward(DOUT.p(), QKV.p(), P.p(), DQKV.p(), s, drop);
      expect_close(dqkv, DQKV.host(), p == Precision::f32 ? 1e-4 : 5e-2, "attention dqkv " + what);
    }
}

// Grouped-query attention (K kv heads for H query heads; multi-query at K = 1): the GPU folds a
// group's heads into one product where the CPU adds G products, so dk and dv agree to rounding.
TEST(CudaKernels, GroupedQueryAttentionForwardAndBackward) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  struct Case {
    int64_t H, K;
    bool causal;
  };
  for (const Case c : {Case{8, 2, true}, Case{4, 1, false}, Case{6, 3, true}})
    for (Precision p : {Precision::f32, Precision::bf16}) {
      AttentionShape s{3, 17, c.H, 8, c.causal, p};
      s.kv_heads = c.K;
      const int64_t d = s.H * s.Dh, rows = s.B * s.T, np = s.B * s.H * s.T * s.T, width = s.row_width();
      const auto qkv = rand_vec(rows * width, 27), dout = rand_vec(rows * d, 28);
      std::vector<float> out(rows * d), probs(np), dqkv(rows * width, 9.0f);
      OnDevice<float> QKV(G, qkv), OUT(G, out), P(G, probs), DOUT(G, dout), DQKV(G, dqkv);
      const DropoutSpec drop = spec(0.2f, 5, kDropAttnProbs);
      AttentionShape cpu_shape = s;
      cpu_shape.precision = Precision::f32;
      C.attention_forward(qkv.data(), out.data(), probs.data(), cpu_shape, drop);
      G.attention_forward(QKV.p(), OUT.p(), P.p(), s, drop);
      const double tol = p == Precision::f32 ? 1e-5 : 2e-2;
      const std::string what = "H " + std::to_string(c.H) + " K " + std::to_string(c.K) +
                               (c.causal ? " causal" : " full") + (p == Precision::f32 ? " f32" : " bf16");
      expect_close(probs, P.host(), tol, "gqa probs " + what);
      expect_close(out, OUT.host(), tol, "gqa out " + what);
      C.attention_backward(dout.data(), qkv.data(), probs.data(), dqkv.data(), cpu_shape, drop);
      G.attention_backward(DOUT.p(), QKV.p(), P.p(), DQKV.p(), s, drop);
      const auto got = DQKV.host();
      const double gtol = p == Precision::f32 ? 1e-4 : 5e-2;
      for (int part = 0; part < 3; ++part) {  // q, k, v columns compared apart, each on its own scale
        const int64_t at = part == 0 ? 0 : d + (part - 1) * s.kv() * s.Dh, n = part == 0 ? d : s.kv() * s.Dh;
        std::vector<float> want_p, got_p;
        for (int64_t r = 0; r < rows; ++r) {
          want_p.insert(want_p.end(), dqkv.begin() + r * width + at, dqkv.begin() + r * width + at + n);
          got_p.insert(got_p.end(), got.begin() + r * width + at, got.begin() + r * width + at + n);
        }
        expect_close(want_p, got_p, gtol, std::string("gqa d") + "qkv"[part] + " " + what);
      }
    }
}

TEST(CudaKernels, RopeForwardAndBackward) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  struct Case {
    int64_t B, T, H, K, hd;
    float theta;
    int64_t first;
  };
  for (const Case c : {Case{2, 37, 4, 0, 64, 10000.0f, 0}, Case{3, 19, 8, 2, 128, 500000.0f, 4000},
                       Case{1, 5, 3, 1, 6, 10000.0f, 1}})
    for (bool inverse : {false, true}) {
      RopeShape s;
      s.B = c.B;
      s.T = c.T;
      s.heads = c.H;
      s.kv_heads = c.K;
      s.head_dim = c.hd;
      s.theta = c.theta;
      s.first_position = c.first;
      const auto x = rand_vec(s.B * s.T * s.row_width(), 29, -2.0f, 2.0f);
      auto want = x;
      OnDevice<float> X(G, x);
      if (inverse) {
        C.rope_backward(want.data(), s);
        G.rope_backward(X.p(), s);
      } else {
        C.rope_forward(want.data(), s);
        G.rope_forward(X.p(), s);
      }
      const auto got = X.host();
      const std::string what = std::string(inverse ? "rope backward" : "rope forward") + " hd " +
                               std::to_string(c.hd) + " first position " + std::to_string(c.first);
      expect_close(want, got, 1e-6, what);  // the same float32 angles; cos and sin to an ulp or two
      const int64_t qk = (s.heads + s.kv()) * s.head_dim, width = s.row_width();
      for (int64_t r = 0; r < s.B * s.T; ++r)
        for (int64_t i = qk; i < width; ++i) ASSERT_EQ(got[size_t(r * width + i)], x[size_t(r * width + i)]) << "v moved";
      EXPECT_NE(got, x) << what;
    }
}

TEST(CudaKernels, EmbeddingForwardAndBackward) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t B = 4, T = 9, d = 24, V = 11;
  std::vector<int32_t> tok(B * T);
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = int32_t((i * 7) % V);
  const auto wte = rand_vec(V * d, 15), pos = rand_vec(T * d, 16), dout = rand_vec(B * T * d, 17);
  std::vector<float> out(B * T * d), dwte(V * d, 0.1f), dpos(T * d, -0.1f);
  OnDevice<int32_t> TOK(G, tok);
  OnDevice<float> WTE(G, wte), POS(G, pos), OUT(G, out), DOUT(G, dout), DWTE(G, dwte), DPOS(G, dpos);
  for (const VocabRange range : {VocabRange{0, V}, VocabRange{4, 5}}) {  // whole, and a vocabulary slice
    C.embedding_forward(tok.data(), wte.data(), pos.data(), out.data(), B, T, d, range);
    G.embedding_forward(TOK.p(), WTE.p(), POS.p(), OUT.p(), B, T, d, range);
    expect_close(out, OUT.host(), 0.0, "embedding out");
    C.embedding_backward(tok.data(), dout.data(), dwte.data(), dpos.data(), B, T, d, range);
    G.embedding_backward(TOK.p(), DOUT.p(), DWTE.p(), DPOS.p(), B, T, d, range);
    expect_close(dwte, DWTE.host(), 1e-6, "embedding dwte");
    expect_close(dpos, DPOS.host(), 1e-6, "embedding dpos");
  }
}

TEST(CudaKernels, ClassifierCrossEntropyLossAndGradients) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t N = 1100, d = 32, V = 777;  // more rows than one CPU chunk
  const auto x = rand_vec(N * d, 18), W = rand_vec(V * d, 19, -0.3f, 0.3f), bias = rand_vec(V, 20);
  // The whole vocabulary; then a padded last slice (no combiner): words [100, 800) in rows [0, 700),
  // rows [700, 777) padding, targets below 100 in another slice.
  struct Slice {
    int64_t vocab_begin, words;
  };
  for (const Slice sl : {Slice{0, -1}, Slice{100, 700}}) {
    const int64_t words = sl.words >= 0 ? sl.words : V, vocab = sl.vocab_begin + words;
    std::vector<int32_t> tg(N);
    for (int64_t i = 0; i < N; ++i) tg[size_t(i)] = int32_t((i * 31) % vocab);
    for (Precision p : {Precision::f32, Precision::bf16}) {
      SCOPED_TRACE("vocab_begin " + std::to_string(sl.vocab_begin) + ", words " + std::to_string(sl.words) + ", " +
                   (p == Precision::f32 ? "f32" : "bf16"));
      std::vector<float> dx(N * d), dW(V * d, 0.01f), db(V, 0.02f), rows(N);
      OnDevice<float> X(G, x), Wd(G, W), Bd(G, bias), DX(G, dx), DW(G, dW), DB(G, db), ROWS(G, rows);
      OnDevice<int32_t> TG(G, tg);
      OnDevice<double> LOSS(G, std::vector<double>{0.5});
      ClassifierArgs a{x.data(), W.data(), bias.data(), tg.data(), N, d, V, p};
      a.vocab_begin = sl.vocab_begin;
      a.words = sl.words;
      a.grad_scale = 1.0f / float(N);
      a.dx = dx.data();
      a.dW = dW.data();
      a.dbias = db.data();
      double loss = 0.5;
      C.classifier_loss(a, rows.data(), &loss);
      ClassifierArgs g{X.p(), Wd.p(), Bd.p(), TG.p(), N, d, V, p};
      g.vocab_begin = sl.vocab_begin;
      g.words = sl.words;
      g.grad_scale = a.grad_scale;
      g.dx = DX.p();
      g.dW = DW.p();
      g.dbias = DB.p();
      G.classifier_loss(g, ROWS.p(), LOSS.p());
      const double tol = p == Precision::f32 ? 1e-5 : 2e-2;
      EXPECT_NEAR(LOSS.host()[0], loss, tol * std::fabs(loss)) << "loss sum";
      expect_close(rows, ROWS.host(), tol, "row losses");
      expect_close(dx, DX.host(), tol, "classifier dx");
      const auto gdW = DW.host(), gdb = DB.host();
      expect_close(dW, gdW, tol, "classifier dW (accumulated)");
      expect_close(db, gdb, tol, "classifier dbias (accumulated)");
      // padding rows get no gradient: their accumulators keep the initial values exactly
      for (int64_t v = words; v < V; ++v) {
        EXPECT_EQ(gdb[size_t(v)], 0.02f) << "dbias of padding row " << v;
        for (int64_t k = 0; k < d; ++k) ASSERT_EQ(gdW[size_t(v * d + k)], 0.01f) << "dW of padding row " << v;
      }
    }
  }
}

// The count of right predictions (ClassifierArgs::correct), in one pass and in the three passes of a
// vocabulary slice (a combiner with no other slice to join), with and without gradients, against the
// CPU's count and the count the targets were chosen to give: a target is the row's best word by a
// clear margin or clearly not, so neither device's rounding can change which.
TEST(CudaKernels, ClassifierCountsRightPredictions) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t N = 600, d = 16, V = 50;  // more rows than one CPU chunk
  const auto x = rand_vec(N * d, 36), W = rand_vec(V * d, 37), bias = rand_vec(V, 38);
  std::vector<int32_t> tg(N);
  int64_t right = 0;
  for (int64_t r = 0; r < N; ++r) {
    std::vector<double> l(V);
    for (int64_t v = 0; v < V; ++v) {
      l[v] = bias[v];
      for (int64_t k = 0; k < d; ++k) l[v] += double(x[r * d + k]) * double(W[v * d + k]);
    }
    const auto order = [&](int64_t a, int64_t b) { return l[a] < l[b]; };
    std::vector<int64_t> idx(V);
    for (int64_t v = 0; v < V; ++v) idx[v] = v;
    std::sort(idx.begin(), idx.end(), order);
    const int64_t best = idx[V - 1], worst = idx[0];
    const bool clear = l[best] - l[idx[V - 2]] > 0.1;
    tg[r] = int32_t(r % 2 == 0 && clear ? best : worst);
    right += r % 2 == 0 && clear;
  }
  ASSERT_GT(right, N / 8) << "the data should give a fair number of right predictions";
  struct NoOtherSlice : RowStatsCombiner {
    void max(float*, int64_t) override {}
    void sum(float*, int64_t) override {}
  } alone;
  for (Precision p : {Precision::f32, Precision::bf16})
    for (bool combined : {false, true})
      for (bool grad : {false, true}) {
        SCOPED_TRACE(std::string(p == Precision::f32 ? "f32" : "bf16") + (combined ? ", three passes" : ", one pass") +
                     (grad ? ", with gradients" : ""));
        std::vector<float> dx(N * d), dW(V * d), db(V);
        OnDevice<float> X(G, x), Wd(G, W), Bd(G, bias), DX(G, dx), DW(G, dW), DB(G, db);
        OnDevice<int32_t> TG(G, tg);
        OnDevice<double> LOSS(G, std::vector<double>{0.0}), RIGHT(G, std::vector<double>{2.0});
        double loss = 0.0, cpu_right = 2.0;
        ClassifierArgs a{x.data(), W.data(), bias.data(), tg.data(), N, d, V, p};
        ClassifierArgs g{X.p(), Wd.p(), Bd.p(), TG.p(), N, d, V, p};
        a.combine = g.combine = combined ? &alone : nullptr;
        a.correct = &cpu_right;
        g.correct = RIGHT.p();
        if (grad) {
          a.grad_scale = g.grad_scale = 1.0f / float(N);
          a.dx = dx.data(), a.dW = dW.data(), a.dbias = db.data();
          g.dx = DX.p(), g.dW = DW.p(), g.dbias = DB.p();
        }
        C.classifier_loss(a, nullptr, &loss);
        G.classifier_loss(g, nullptr, LOSS.p());
        EXPECT_EQ(cpu_right, 2.0 + double(right)) << "the CPU's count (added to 2)";
        EXPECT_EQ(RIGHT.host()[0], 2.0 + double(right)) << "the GPU's count (added to 2)";
        EXPECT_NEAR(LOSS.host()[0], loss, (p == Precision::f32 ? 1e-5 : 2e-2) * std::fabs(loss)) << "loss sum";
      }
}

// Convolution (cuDNN) against the CPU's (oneDNN): forward with and without bias, the input's
// gradient (overwritten: dx starts as garbage), and the weight's and bias's gradients, accumulated:
// a second call adds as much again.
TEST(CudaKernels, Conv2dForwardAndBackward) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const ConvShape shapes[] = {
      {4, 1, 28, 28, 32, 3, 3, 1, 0},  // the MNIST CNN's first convolution
      {3, 32, 12, 12, 64, 3, 3, 1, 0},  // its second, on a smaller image
      {2, 5, 11, 9, 7, 3, 2, 2, 1},     // non-square image and kernel, stride 2, padding 1
      {3, 4, 8, 8, 6, 1, 1, 1, 0},      // 1×1
  };
  int seed = 100;
  for (const ConvShape& s : shapes)
    for (Precision p : {Precision::f32, Precision::bf16})
      for (bool with_bias : {true, false}) {
        SCOPED_TRACE(std::string(p == Precision::f32 ? "f32" : "bf16") + (with_bias ? ", bias" : ", no bias") +
                     ": x [" + std::to_string(s.N) + ", " + std::to_string(s.C) + ", " + std::to_string(s.H) + ", " +
                     std::to_string(s.W) + "], w [" + std::to_string(s.K) + ", " + std::to_string(s.C) + ", " +
                     std::to_string(s.R) + ", " + std::to_string(s.S) + "], stride " + std::to_string(s.stride) +
                     ", pad " + std::to_string(s.pad));
        const double tol = p == Precision::f32 ? 1e-5 : 2e-2;
        const auto x = rand_vec(s.input_floats(), ++seed), w = rand_vec(s.weight_floats(), ++seed, -0.5f, 0.5f);
        const auto bias = rand_vec(s.K, ++seed), dy = rand_vec(s.output_floats(), ++seed);
        const auto dw0 = rand_vec(s.weight_floats(), ++seed), db0 = rand_vec(s.K, ++seed);
        std::vector<float> y(s.output_floats(), 3.0f), dx(s.input_floats(), 3.0f), dw = dw0, db = db0;
        OnDevice<float> X(G, x), Wd(G, w), Bd(G, bias), Y(G, y), DY(G, dy), DX(G, dx), DW(G, dw0), DB(G, db0);

        C.conv2d_forward(x.data(), w.data(), with_bias ? bias.data() : nullptr, y.data(), s, p);
        G.conv2d_forward(X.p(), Wd.p(), with_bias ? Bd.p() : nullptr, Y.p(), s, p);
        expect_close(y, Y.host(), tol, "conv y");

        C.conv2d_backward_input(dy.data(), w.data(), dx.data(), s, p);
        G.conv2d_backward_input(DY.p(), Wd.p(), DX.p(), s, p);
        expect_close(dx, DX.host(), tol, "conv dx");

        float* dbias_cpu = with_bias ? db.data() : nullptr;
        float* dbias_gpu = with_bias ? DB.p() : nullptr;
        G.conv2d_backward_weight(X.p(), DY.p(), DW.p(), dbias_gpu, s, p);
        const auto dw1 = DW.host(), db1 = DB.host();
        for (int twice = 0; twice < 2; ++twice) C.conv2d_backward_weight(x.data(), dy.data(), dw.data(), dbias_cpu, s, p);
        G.conv2d_backward_weight(X.p(), DY.p(), DW.p(), dbias_gpu, s, p);
        const auto dw2 = DW.host(), db2 = DB.host();
        expect_close(dw, dw2, tol, "conv dw (two calls accumulated)");
        // the second call added what the first did
        std::vector<float> added(dw0.size()), twice_first(dw0.size());
        for (size_t i = 0; i < dw0.size(); ++i) {
          added[i] = dw2[i] - dw0[i];
          twice_first[i] = 2.0f * (dw1[i] - dw0[i]);
        }
        expect_close(twice_first, added, tol, "conv dw: the second call adds the first's gradient again");
        if (with_bias) {
          expect_close(db, db2, tol, "conv dbias (two calls accumulated)");
          for (int64_t k = 0; k < s.K; ++k)
            EXPECT_NEAR(db2[k] - db0[k], 2.0f * (db1[k] - db0[k]), 1e-4 * (1.0 + std::fabs(db2[k]))) << "dbias " << k;
        } else {
          EXPECT_EQ(db0, db2) << "no bias: its gradient buffer untouched";
        }
      }
}

// Max pooling (cuDNN) against the CPU's (oneDNN): the maximum of each window exactly, and the
// gradient routed to it (dx overwritten; overlapping windows add theirs).
TEST(CudaKernels, MaxPoolForwardAndBackward) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const PoolShape shapes[] = {
      {4, 32, 24, 24, 2, 2},  // the MNIST CNN's pooling
      {2, 3, 11, 9, 2, 2},    // odd sizes: the last row and column are left out
      {2, 3, 9, 10, 3, 2},    // overlapping windows
  };
  int seed = 200;
  for (const PoolShape& s : shapes) {
    SCOPED_TRACE("x [" + std::to_string(s.N) + ", " + std::to_string(s.C) + ", " + std::to_string(s.H) + ", " +
                 std::to_string(s.W) + "], kernel " + std::to_string(s.kernel) + ", stride " + std::to_string(s.stride));
    const auto x = rand_vec(s.input_floats(), ++seed), dy = rand_vec(s.output_floats(), ++seed);
    std::vector<float> y(s.output_floats(), 3.0f), dx(s.input_floats(), 3.0f);
    std::vector<uint8_t> ws(std::max<size_t>(1, C.maxpool_workspace_bytes(s)));
    OnDevice<float> X(G, x), Y(G, y), DY(G, dy), DX(G, dx);
    Buffer gws(G, std::max<size_t>(1, G.maxpool_workspace_bytes(s)));
    C.maxpool_forward(x.data(), y.data(), ws.data(), s);
    G.maxpool_forward(X.p(), Y.p(), gws.data(), s);
    expect_close(y, Y.host(), 0.0, "maxpool y");
    C.maxpool_backward(x.data(), y.data(), dy.data(), dx.data(), ws.data(), s);
    G.maxpool_backward(X.p(), Y.p(), DY.p(), DX.p(), gws.data(), s);
    expect_close(dx, DX.host(), 1e-6, "maxpool dx");
  }
}

TEST(CudaKernels, OptimizersAndReductions) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t n = 100003;
  auto p = rand_vec(n, 21), g = rand_vec(n, 22), m = rand_vec(n, 23, -0.01f, 0.01f), v = rand_vec(n, 24, 0.0f, 0.01f);
  OnDevice<float> P(G, p), Gr(G, g), Mo(G, m), Ve(G, v);
  const AdamWHyper h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3};
  C.adamw_update(p.data(), g.data(), m.data(), v.data(), n, h);
  G.adamw_update(P.p(), Gr.p(), Mo.p(), Ve.p(), n, h);
  expect_close(p, P.host(), 1e-6, "adamw params");
  expect_close(v, Ve.host(), 1e-6, "adamw exp_avg_sq");
  C.sgd_update(p.data(), g.data(), m.data(), n, {0.1f, 0.9f, 0.01f, false});
  G.sgd_update(P.p(), Gr.p(), Mo.p(), n, {0.1f, 0.9f, 0.01f, false});
  expect_close(p, P.host(), 1e-6, "sgd params");
  OnDevice<double> S(G, std::vector<double>{1.0});
  G.sumsq(Gr.p(), n, S.p());
  EXPECT_NEAR(S.host()[0], 1.0 + sumsq_deterministic(g.data(), n), 1e-9 * double(n));
  const int64_t rows = 1000, cols = 300;
  const auto x = rand_vec(rows * cols, 25);
  std::vector<float> cs(cols, 1.0f);
  OnDevice<float> Xd(G, x), CS(G, cs);
  C.colsum_accumulate(x.data(), cs.data(), rows, cols);
  G.colsum_accumulate(Xd.p(), CS.p(), rows, cols);
  expect_close(cs, CS.host(), 1e-5, "colsum");
  std::vector<float> a = rand_vec(n, 26), out(n);
  OnDevice<float> Ad(G, a), Out(G, out);
  C.add(a.data(), g.data(), out.data(), n);
  G.add(Ad.p(), Gr.p(), Out.p(), n);
  expect_close(out, Out.host(), 0.0, "add");
}
