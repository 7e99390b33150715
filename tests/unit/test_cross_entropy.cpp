// Fused classifier + cross-entropy: loss and gradients against references and finite differences, chunking, bf16.
#include "kernel_test_util.hpp"

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

// More rows than one chunk (512 rows in f32, 1024 in bf16; ragged pieces of a chunk): every chunk's
// loss, dx rows and dW/dbias contributions, in f32 and in bf16 (its products round the inputs,
// weights and gradient; on a CPU without bf16 products the bf16 case computes in f32).
TEST(CrossEntropy, ChunkedRows) {
  std::mt19937 g(62);
  const int64_t N = 1300, d = 6, V = 13;
  const float scale = 1.0f / float(N);
  Vec x = randu(N * d, g, -2.0f, 2.0f), W = randu(V * d, g), bias = randu(V, g);
  auto tgt = rand_targets(N, V, g);
  const CeRef r = ref_ce(x, W, &bias, tgt, N, d, V, scale);
  for (const Precision p : {Precision::f32, Precision::bf16}) {
    SCOPED_TRACE(p == Precision::bf16 ? "bf16" : "f32");
    const double tol = p == Precision::bf16 ? 2e-2 : 1e-5;  // bf16: 8 bits of mantissa
    const double grad_tol = p == Precision::bf16 ? 2e-2 : 1e-4;  // relative, and of the largest element
    Vec per_row(N, -1.0f), dx(N * d), dW(V * d), db(V);
    ClassifierArgs a{x.data(), W.data(), bias.data(), tgt.data(), N, d, V, p};
    a.grad_scale = scale;
    a.dx = dx.data();
    a.dW = dW.data();
    a.dbias = db.data();
    const double loss = classifier_cross_entropy(a, per_row.data());
    EXPECT_NEAR(loss, r.loss, tol * r.loss);
    expect_close(per_row, r.per_row, tol, tol * 0.1, "per_row");
    expect_close(dx, r.dx, grad_tol, grad_tol * max_abs(r.dx), "dx");
    expect_close(dW, r.dW, grad_tol, grad_tol * max_abs(r.dW), "dW");
    expect_close(db, r.db, grad_tol, grad_tol * max_abs(r.db), "dbias");
    // evaluation (no gradient) over the same rows gives the same loss
    ClassifierArgs e{x.data(), W.data(), bias.data(), tgt.data(), N, d, V, p};
    EXPECT_NEAR(classifier_cross_entropy(e), loss, 1e-9 * loss);
  }
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

TEST(CrossEntropy, RightPredictionsAreArgmaxs) {
  std::mt19937 g(11);
  const int64_t N = 300, d = 6, V = 9;  // several pieces of a chunk
  Vec x = randu(size_t(N * d), g), W = randu(size_t(V * d), g);
  std::vector<int32_t> t(static_cast<size_t>(N));
  for (auto& v : t) v = int32_t(g() % V);
  // the reference: argmax of x Wᵀ (the first of a tie)
  int64_t want = 0;
  for (int64_t r = 0; r < N; ++r) {
    int64_t best = 0;
    double best_v = -1e300;
    for (int64_t v = 0; v < V; ++v) {
      double s = 0;
      for (int64_t k = 0; k < d; ++k) s += double(x[size_t(r * d + k)]) * W[size_t(v * d + k)];
      if (s > best_v) best_v = s, best = v;
    }
    want += best == t[size_t(r)];
  }
  double right = 0;
  ClassifierArgs a{x.data(), W.data(), nullptr, t.data(), N, d, V};
  a.correct = &right;
  classifier_cross_entropy(a);
  EXPECT_EQ(right, double(want));
  // all scores equal (zero weights): every row predicts class 0, as argmax does
  Vec zeros(size_t(V * d), 0.0f);
  double tied = 0;
  ClassifierArgs z{x.data(), zeros.data(), nullptr, t.data(), N, d, V};
  z.correct = &tied;
  classifier_cross_entropy(z);
  EXPECT_EQ(tied, double(std::count(t.begin(), t.end(), 0)));
  // (vocabulary slices combine the same count: test_tensor_parallel)
}
