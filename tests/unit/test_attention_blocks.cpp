// Ring attention's block kernels against attention over the whole sequence: context parallel
// simulated in one process (cp ranks, each holding chunks i and 2cp−1−i, attending to every rank's kv
// block in turn), causal and unmasked, with and without dropout, multi-head and grouped-query, a
// tensor-parallel slice of the heads; and that the order of the blocks changes only rounding.
#include <cstdio>
#include <limits>
#include <string>

#include "kernel_test_util.hpp"
#include "kernels/cpu/attention_blocks.hpp"

namespace {

constexpr int64_t kB = 2, kDh = 8;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

DropoutSpec attn_drop(float p) {
  DropoutSpec s;
  s.p = p;
  s.seed = 77;
  s.step = 3;
  s.unit = 2;
  s.site = 1;
  s.sample_offset = 5;
  return s;
}

// Rows of x [B*L, width] at the shard's positions, and back.
Vec gather(const Vec& x, int64_t width, int64_t L, const SequenceShard& sh, int64_t T) {
  Vec y(kB * T * width);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(x.begin() + (b * L + sh.position(t)) * width, width, y.begin() + (b * T + t) * width);
  return y;
}
void scatter(const Vec& y, Vec& x, int64_t width, int64_t L, const SequenceShard& sh, int64_t T) {
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(y.begin() + (b * T + t) * width, width, x.begin() + (b * L + sh.position(t)) * width);
}

// The pass's head slice [h0, h0 + hn) of rows in qkv's layout (its q heads and their kv heads).
Vec slice_qkv(const Vec& x, const AttentionShape& s, int64_t h0, int64_t hn) {
  const int64_t G = s.group(), Dh = s.Dh, k0 = h0 / G, kn = hn / G, row = s.row_width(), K = s.kv();
  const int64_t w = (hn + 2 * kn) * Dh;
  Vec y(x.size() / row * w);
  for (size_t r = 0; r < x.size() / row; ++r) {
    const float* in = x.data() + r * row;
    float* out = y.data() + r * w;
    std::copy_n(in + h0 * Dh, hn * Dh, out);
    std::copy_n(in + (s.H + k0) * Dh, kn * Dh, out + hn * Dh);
    std::copy_n(in + (s.H + K + k0) * Dh, kn * Dh, out + (hn + kn) * Dh);
  }
  return y;
}
// The same slice of rows [*, H*Dh] (out, dout).
Vec slice_out(const Vec& x, const AttentionShape& s, int64_t h0, int64_t hn) {
  const int64_t d = s.H * s.Dh;
  Vec y(x.size() / d * hn * s.Dh);
  for (size_t r = 0; r < x.size() / d; ++r) std::copy_n(x.data() + r * d + h0 * s.Dh, hn * s.Dh, &y[r * hn * s.Dh]);
  return y;
}

struct Whole {
  Vec out, dqkv;  // [B*L, ...] at global positions
};

// Ring attention over cp simulated ranks (cp = 0: one pass over the whole sequence, inactive shards)
// for the pass shape s (T = L): forward over every block, finish, delta, backward with each block's
// dkv summed at its owner. Rank i takes blocks i, i-1, ... (ring order), or i+1, i+2, ... (`skewed`:
// its own last). Outputs start as NaN: what `first` does not write shows.
Whole ring(const Vec& qkv, const Vec& dout, const AttentionShape& s, int64_t cp, const DropoutSpec& drop,
           bool skewed = false) {
  const int64_t L = s.T, n = std::max<int64_t>(cp, 1), c = cp ? L / (2 * cp) : 0, T = cp ? 2 * c : L;
  const int64_t row = s.row_width(), d = s.H * s.Dh, kvw = 2 * s.kv() * s.Dh;
  AttentionShape local = s;
  local.T = T;
  std::vector<SequenceShard> shard(n);
  std::vector<Vec> q(n), kv(n), dkv(n, Vec(kB * T * kvw, 0.0f)), dq(n, Vec(kB * T * row, kNaN));
  for (int64_t i = 0; i < n; ++i) {
    if (cp) shard[i] = {L, c, i * c, (2 * cp - 1 - i) * c};
    q[i] = gather(qkv, row, L, shard[i], T);
    kv[i].assign(kB * T * kvw, kNaN);
    kv_block_pack(q[i].data(), kv[i].data(), local);
  }
  auto block = [&](int64_t i, int64_t k) { return skewed ? (i + 1 + k) % n : (i - k + n) % n; };
  Whole w{Vec(kB * L * d, kNaN), Vec(kB * L * row, kNaN)};
  for (int64_t i = 0; i < n; ++i) {
    const AttentionBlocks a{local, shard[i]};
    Vec out(kB * T * d, kNaN), stats(kB * s.H * T * 2, kNaN), lse(kB * s.H * T), delta(kB * s.H * T);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t j = block(i, k);
      attention_block_forward(q[i].data(), kv[j].data(), shard[j], out.data(), stats.data(), a, drop, k == 0);
    }
    attention_blocks_finish(out.data(), stats.data(), lse.data(), a);
    scatter(out, w.out, d, L, shard[i], T);
    const Vec dout_i = gather(dout, d, L, shard[i], T);
    attention_blocks_delta(dout_i.data(), out.data(), delta.data(), a);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t j = block(i, k);
      attention_block_backward(dout_i.data(), q[i].data(), kv[j].data(), shard[j], lse.data(), delta.data(),
                               dq[i].data(), dkv[j].data(), a, drop, k == 0);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    kv_block_unpack(dkv[j].data(), dq[j].data(), local);
    scatter(dq[j], w.dqkv, row, L, shard[j], T);
  }
  return w;
}

// The largest |got - ref| relative to the largest |ref| (the tensor's scale).
double scaled_error(const Vec& got, const Vec& ref) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(double(got[i]) - double(ref[i])));
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  return std::isnan(err) || got.size() != ref.size() ? 1e30 : err / scale;
}

struct Case {
  int64_t L, H, K;
  bool causal;
  float p;
  int64_t h0 = 0, hn = 0;  // the pass's heads; hn 0: all
};

struct Worst {
  double out = 0, grad = 0;
  void print(const char* what) const {
    std::printf("%s: worst error relative to the tensor's largest entry: out %.3g, dqkv %.3g\n", what, out, grad);
  }
};

// One case against attention_forward / attention_backward over the whole sequence (all heads).
void check_case(const Case& k, int64_t cp, uint32_t seed, Worst& worst) {
  SCOPED_TRACE("cp " + std::to_string(cp) + " L " + std::to_string(k.L) + " K " + std::to_string(k.K) + " causal " +
               std::to_string(k.causal) + " p " + std::to_string(k.p) + " heads from " + std::to_string(k.h0));
  std::mt19937 g(seed);
  AttentionShape full{kB, k.L, k.H, kDh, k.causal};
  full.kv_heads = k.K;
  const int64_t rows = kB * k.L;
  const Vec qkv = randu(rows * full.row_width(), g, -1.5f, 1.5f), dout = randu(rows * k.H * kDh, g);
  DropoutSpec drop = attn_drop(k.p);
  Vec out(rows * k.H * kDh), probs(kB * k.H * k.L * k.L), dqkv(rows * full.row_width());
  attention_forward(qkv.data(), out.data(), probs.data(), full, drop);
  attention_backward(dout.data(), qkv.data(), probs.data(), dqkv.data(), full, drop);
  const int64_t hn = k.hn ? k.hn : k.H;
  AttentionShape pass = full;
  pass.H = hn;
  pass.kv_heads = hn / full.group();
  drop.col_offset = k.h0 * k.L * k.L;
  drop.global_cols = k.H * k.L * k.L;
  const Whole w = ring(slice_qkv(qkv, full, k.h0, hn), slice_out(dout, full, k.h0, hn), pass, cp, drop);
  const Vec ref_out = slice_out(out, full, k.h0, hn), ref_dqkv = slice_qkv(dqkv, full, k.h0, hn);
  const double eo = scaled_error(w.out, ref_out), eg = scaled_error(w.dqkv, ref_dqkv);
  worst.out = std::max(worst.out, eo);
  worst.grad = std::max(worst.grad, eg);
  expect_close(w.out, ref_out, 1e-5, 1e-6, "out");
  expect_close(w.dqkv, ref_dqkv, 1e-4, 1e-5, "dqkv");
}

// Every cp (0: one pass, inactive shards), length and kv head count.
void check_all(bool causal, float p, uint32_t seed) {
  Worst worst;
  for (int64_t cp : {0, 1, 2, 4})
    for (int64_t L : {16, 24})
      for (int64_t K : {4, 2, 1}) check_case({L, 4, K, causal, p}, cp, seed++, worst);
  const std::string what = std::string(causal ? "causal" : "unmasked") + (p > 0 ? ", dropout" : "");
  worst.print(what.c_str());
}

}  // namespace

TEST(AttentionBlocks, PackUnpack) {
  std::mt19937 g(1);
  AttentionShape s{kB, 6, 4, kDh, true};
  s.kv_heads = 2;
  const int64_t rows = kB * s.T, d = s.H * kDh, kvw = 2 * s.kv() * kDh;
  const Vec qkv = randu(rows * s.row_width(), g);
  Vec kv(rows * kvw), back(rows * s.row_width(), 5.0f);
  kv_block_pack(qkv.data(), kv.data(), s);
  kv_block_unpack(kv.data(), back.data(), s);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < s.row_width(); ++c)
      ASSERT_EQ(back[r * s.row_width() + c], c < d ? 5.0f : qkv[r * s.row_width() + c]) << r << "," << c;
}

TEST(AttentionBlocks, CausalMatchesWholeSequence) { check_all(true, 0.0f, 100); }
TEST(AttentionBlocks, UnmaskedMatchesWholeSequence) { check_all(false, 0.0f, 200); }
TEST(AttentionBlocks, CausalDropoutMatchesWholeSequence) { check_all(true, 0.1f, 300); }
TEST(AttentionBlocks, UnmaskedDropoutMatchesWholeSequence) { check_all(false, 0.1f, 400); }

// Tensor parallel: the pass holds heads 2..3 of 4 (dropout mask columns from 2·L·L on).
TEST(AttentionBlocks, TensorParallelHeadSlice) {
  uint32_t seed = 500;
  Worst worst;
  for (int64_t cp : {1, 2, 4})
    for (int64_t K : {4, 2})
      for (bool causal : {true, false}) check_case({16, 4, K, causal, 0.1f, 2, 2}, cp, seed++, worst);
  worst.print("heads 2..3 of 4");
}

// Blocks in another order (each rank's own block last, so a causal rank's first block can hide every
// key from some of its queries) give the same results to rounding; and any thread count the same bits.
TEST(AttentionBlocks, BlockOrderAndThreads) {
  std::mt19937 g(600);
  AttentionShape s{kB, 24, 4, kDh, true};
  s.kv_heads = 2;
  const Vec qkv = randu(kB * s.T * s.row_width(), g, -1.5f, 1.5f), dout = randu(kB * s.T * s.H * kDh, g);
  const DropoutSpec drop = attn_drop(0.1f);
  for (int64_t cp : {2, 4}) {
    const Whole ring_order = ring(qkv, dout, s, cp, drop), skewed = ring(qkv, dout, s, cp, drop, true);
    expect_close(skewed.out, ring_order.out, 2e-6, 1e-7, "out");
    expect_close(skewed.dqkv, ring_order.dqkv, 1e-5, 1e-6, "dqkv");
    std::printf("cp %lld, block order: out %.3g, dqkv %.3g\n", (long long)cp, scaled_error(skewed.out, ring_order.out),
                scaled_error(skewed.dqkv, ring_order.dqkv));
    Whole one, two;
    {
      Threads t(1);
      one = ring(qkv, dout, s, cp, drop);
    }
    {
      Threads t(2);
      two = ring(qkv, dout, s, cp, drop);
    }
    EXPECT_EQ(one.out, two.out);
    EXPECT_EQ(one.dqkv, two.dqkv);
  }
}

// The general geometry: queries at all positions 0..L-1 (inactive shard), one block holding the
// second half of the sequence then the first; under the causal mask the early queries see none of
// the block's first run, so their rows start on its second.
TEST(AttentionBlocks, WholeQueriesHalvesSwappedKeys) {
  std::mt19937 g(700);
  for (bool causal : {true, false}) {
    AttentionShape s{kB, 16, 4, kDh, causal};
    s.kv_heads = 2;
    const int64_t L = s.T, rows = kB * L, row = s.row_width(), d = s.H * kDh, kvw = 2 * s.kv() * kDh;
    const Vec qkv = randu(rows * row, g, -1.5f, 1.5f), dout = randu(rows * d, g);
    const DropoutSpec drop = attn_drop(0.1f);
    Vec out(rows * d), probs(kB * s.H * L * L), dqkv(rows * row);
    attention_forward(qkv.data(), out.data(), probs.data(), s, drop);
    attention_backward(dout.data(), qkv.data(), probs.data(), dqkv.data(), s, drop);

    const SequenceShard keys{L, L / 2, L / 2, 0};
    const Vec keyed = gather(qkv, row, L, keys, L);
    Vec kv(rows * kvw), dkv(rows * kvw, 0.0f), got(rows * d, kNaN), stats(kB * s.H * L * 2, kNaN);
    Vec lse(kB * s.H * L), delta(kB * s.H * L), dq(rows * row, kNaN), dkeyed(rows * row, kNaN);
    kv_block_pack(keyed.data(), kv.data(), s);
    const AttentionBlocks a{s, SequenceShard{}};
    attention_block_forward(qkv.data(), kv.data(), keys, got.data(), stats.data(), a, drop, true);
    attention_blocks_finish(got.data(), stats.data(), lse.data(), a);
    expect_close(got, out, 1e-5, 1e-6, "out");
    attention_blocks_delta(dout.data(), got.data(), delta.data(), a);
    attention_block_backward(dout.data(), qkv.data(), kv.data(), keys, lse.data(), delta.data(), dq.data(), dkv.data(),
                             a, drop, true);
    kv_block_unpack(dkv.data(), dkeyed.data(), s);
    Vec dk(rows * row);
    scatter(dkeyed, dk, row, L, keys, L);  // the block's rows back at their positions
    for (int64_t r = 0; r < rows; ++r) std::copy_n(&dk[r * row + d], row - d, &dq[r * row + d]);
    expect_close(dq, dqkv, 1e-4, 1e-5, "dqkv");
  }
}
