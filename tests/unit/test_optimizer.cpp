// Optimizer updates (AdamW, SGD) against torch's formulas, and deterministic reductions.
#include "kernel_test_util.hpp"

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

// Rows added a few at a time (the fused classifier's pieces), in two rounds of rows (its chunks): the
// bits of one colsum_accumulate per round, whatever the pieces and the thread count.
TEST(Reduce, ColumnSumsInPiecesAreColsumToTheBit) {
  std::mt19937 g(82);
  const int64_t rows = 1000, cols = 150, first_round = 600;
  Vec x = randu(rows * cols, g), init = randu(cols, g);
  Vec want = init;
  colsum_accumulate(x.data(), want.data(), first_round, cols);
  colsum_accumulate(x.data() + first_round * cols, want.data(), rows - first_round, cols);
  for (const int64_t piece : {1, 7, 128, 256, 300}) {
    for (const int threads : {1, 2}) {
      Threads t(threads);
      std::vector<float> part(cols, 0.0f), total(cols, 0.0f);
      ColumnSums sums{part.data(), total.data(), cols};
      Vec got = init;
      for (const auto& [r0, r1] : {std::pair<int64_t, int64_t>{0, first_round}, {first_round, rows}}) {
        for (int64_t r = r0; r < r1; r += piece) sums.add(x.data() + r * cols, std::min(piece, r1 - r));
        sums.add_to(got.data());
      }
      EXPECT_EQ(got, want) << "pieces of " << piece << " rows, " << threads << " threads";
    }
  }
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

}
