// Attention: causal and unmasked, with and without dropout, against a double reference and finite
// differences; grouped-query attention (fewer kv heads) against its reference, its finite
// differences and multi-head attention with the kv heads repeated (repeat_kv).
#include "kernel_test_util.hpp"

namespace {
// Double reference of attention_forward with the kernel's dropout mask; probs before dropout.
// Query head h reads kv head h / (H / K).
void ref_attention(const Vec& qkv, const AttentionShape& s, const DropoutSpec& drop, DVec& out, DVec& probs) {
  const int64_t B = s.B, T = s.T, H = s.H, Dh = s.Dh, d = H * Dh, row = s.row_width(), G = s.group();
  const int64_t k_at = d, v_at = d + s.kv() * Dh;
  out.assign(B * T * d, 0.0);
  probs.assign(B * H * T * T, 0.0);
  std::vector<uint8_t> keep(T, 1);
  const double scale = 1.0 / std::sqrt(double(Dh));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = s.causal ? t + 1 : T, kv = (h / G) * Dh;
        DVec sc(n);
        double mx = -1e300;
        for (int64_t j = 0; j < n; ++j) {
          double dd = 0;
          for (int64_t i = 0; i < Dh; ++i)
            dd += double(qkv[(b * T + t) * row + h * Dh + i]) * qkv[(b * T + j) * row + k_at + kv + i];
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
            out[(b * T + t) * d + h * Dh + i] += w * qkv[(b * T + j) * row + v_at + kv + i];
        }
      }
}

void check_attention(bool causal, const DropoutSpec& drop, uint32_t seed, int64_t H = 2, int64_t kv_heads = 0) {
  std::mt19937 g(seed);
  AttentionShape s{2, 5, H, 4, causal};
  s.kv_heads = kv_heads;
  const int64_t rows = s.B * s.T, d = s.H * s.Dh;
  Vec qkv = randu(rows * s.row_width(), g, -1.5f, 1.5f), out(rows * d), probs(s.B * s.H * s.T * s.T, -1.0f);
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

  Vec dqkv(rows * s.row_width(), 55.0f);  // overwritten
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

// Grouped-query attention: 4 query heads on 2 kv heads, and multi-query (3 on 1), against the
// reference and finite differences; kv_heads = H is plain multi-head attention.
TEST(AttentionGqa, CausalForwardBackward) { check_attention(true, DropoutSpec{}, 40, 4, 2); }
TEST(AttentionGqa, UnmaskedForwardBackward) { check_attention(false, DropoutSpec{}, 41, 4, 2); }
TEST(AttentionGqa, CausalWithDropout) { check_attention(true, attn_drop(0.3f), 42, 4, 2); }
TEST(AttentionGqa, MultiQueryWithDropout) { check_attention(true, attn_drop(0.3f), 43, 3, 1); }
TEST(AttentionGqa, KvHeadsEqualToHeads) { check_attention(true, attn_drop(0.3f), 44, 2, 2); }

namespace {
// The multi-head input of a grouped-query one: q as it is, kv head h / G as head h's k and v (repeat_kv).
Vec repeat_kv(const Vec& qkv, const AttentionShape& s) {
  const int64_t rows = s.B * s.T, Dh = s.Dh, H = s.H, K = s.kv(), G = s.group(), d = H * Dh, row = s.row_width();
  Vec out(rows * 3 * d);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(qkv.begin() + r * row, d, out.begin() + r * 3 * d);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t part = 1; part <= 2; ++part)  // k, v
        std::copy_n(qkv.begin() + r * row + d + ((part - 1) * K + h / G) * Dh, Dh,
                    out.begin() + r * 3 * d + part * d + h * Dh);
  }
  return out;
}

// The grouped-query gradient of a repeated-head one: dq as it is, dk and dv of kv head j the sums
// over the repeated heads of its group, in double.
DVec sum_groups(const Vec& dqkv_rep, const AttentionShape& s) {
  const int64_t rows = s.B * s.T, Dh = s.Dh, H = s.H, K = s.kv(), G = s.group(), d = H * Dh, row = s.row_width();
  DVec out(rows * row, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < d; ++c) out[r * row + c] = dqkv_rep[r * 3 * d + c];
    for (int64_t h = 0; h < H; ++h)
      for (int64_t part = 1; part <= 2; ++part)
        for (int64_t i = 0; i < Dh; ++i)
          out[r * row + d + ((part - 1) * K + h / G) * Dh + i] += dqkv_rep[r * 3 * d + part * d + h * Dh + i];
  }
  return out;
}
}  // namespace

// GQA is multi-head attention on repeated kv heads: the same outputs and probabilities, the same
// dq, and dk, dv the repeated heads' gradients summed per group; with dropout the same masks
// (they are keyed per query head in both).
TEST(AttentionGqa, EqualsRepeatedKvHeads) {
  struct Case {
    int64_t H, K;
    bool causal;
    float p;
  };
  std::mt19937 g(45);
  for (const Case c : {Case{4, 2, true, 0.0f}, Case{4, 2, false, 0.0f}, Case{6, 2, true, 0.25f},
                       Case{4, 1, false, 0.25f}, Case{8, 4, true, 0.1f}}) {
    SCOPED_TRACE("H " + std::to_string(c.H) + ", K " + std::to_string(c.K) + (c.causal ? ", causal" : "") +
                 ", dropout " + std::to_string(c.p));
    AttentionShape gqa{3, 9, c.H, 8, c.causal};
    gqa.kv_heads = c.K;
    const AttentionShape mha{3, 9, c.H, 8, c.causal};
    const DropoutSpec drop = c.p > 0 ? attn_drop(c.p) : DropoutSpec{};
    const int64_t rows = gqa.B * gqa.T, d = gqa.H * gqa.Dh, np = gqa.B * gqa.H * gqa.T * gqa.T;
    const Vec qkv = randu(rows * gqa.row_width(), g, -1.5f, 1.5f), rep = repeat_kv(qkv, gqa), dout = randu(rows * d, g);
    Vec out(rows * d), probs(np), dqkv(rows * gqa.row_width()), out_r(rows * d), probs_r(np), dqkv_r(rows * 3 * d);
    attention_forward(qkv.data(), out.data(), probs.data(), gqa, drop);
    attention_forward(rep.data(), out_r.data(), probs_r.data(), mha, drop);
    // the two products differ in shape, so oneDNN may add in another order (AVX2: ~80 ulps)
    expect_close(out, out_r, 1e-5, 1e-6, "out");
    expect_close(probs, probs_r, 1e-6, 1e-8, "probs");
    attention_backward(dout.data(), qkv.data(), probs.data(), dqkv.data(), gqa, drop);
    attention_backward(dout.data(), rep.data(), probs_r.data(), dqkv_r.data(), mha, drop);
    expect_close(dqkv, sum_groups(dqkv_r, gqa), 1e-5, 1e-6, "dqkv (dq; dk, dv summed per group)");
  }
}

TEST(AttentionGqa, SameForOneAndTwoThreads) {
  std::mt19937 g(46);
  AttentionShape s{3, 16, 8, 8, true};
  s.kv_heads = 2;
  const int64_t rows = s.B * s.T, d = s.H * s.Dh;
  const DropoutSpec drop = attn_drop(0.2f);
  const Vec qkv = randu(rows * s.row_width(), g), dout = randu(rows * d, g);
  Vec o1(rows * d), o2(rows * d), p1(s.B * s.H * s.T * s.T), p2(p1.size());
  Vec d1(rows * s.row_width()), d2(d1.size());
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
}

TEST(AttentionGqa, KvHeadsMustDivideHeads) {
  AttentionShape s{1, 2, 4, 2, true};
  s.kv_heads = 3;
  Vec qkv(2 * s.row_width()), out(2 * 8), probs(16);
  EXPECT_THROW(attention_forward(qkv.data(), out.data(), probs.data(), s, DropoutSpec{}), std::logic_error);
}
