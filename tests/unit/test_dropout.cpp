// Dropout: keep fraction, independence of the mask from its keys, same mask forward/backward and for any thread count.
#include "kernel_test_util.hpp"

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

// Context parallel: a rank's rows are two runs of positions of each sample (SequenceShard); its tile
// draws exactly the whole activation's mask at those positions, also from a row offset on (sequence
// parallel within the rank's rows) and for a column slice (tensor parallel).
TEST(Dropout, SequenceShardDrawsTheWholeSequencesMaskAtItsPositions) {
  std::mt19937 g(23);
  const int64_t B = 3, T = 16, d = 40, chunk = 2;  // cp 4: chunks of 2, rank 1 holds chunks 1 and 6
  SequenceShard shard{T, chunk, 1 * chunk, 6 * chunk};
  DropoutSpec whole;
  whole.p = 0.3f;
  whole.seed = 7;
  whole.step = 2;
  whole.unit = 3;
  whole.site = 1;
  whole.sample_offset = 4;
  whole.rows_per_sample = T;
  const Vec ones(size_t(B * T * d), 1.0f);
  Vec all(ones.size());
  dropout_forward(ones.data(), all.data(), B * T, d, whole);
  const int64_t local = 2 * chunk;
  for (int64_t from : {int64_t(0), int64_t(3)}) {  // the rank's rows from `from` on
    for (int64_t cols : {d, int64_t(8)}) {          // whole rows, or columns 16..23 of each
      SCOPED_TRACE("from row " + std::to_string(from) + ", " + std::to_string(cols) + " columns");
      DropoutSpec s = whole;
      s.rows_per_sample = local;
      s.row_offset = from;
      s.sequence = shard;
      s.global_cols = d;
      s.col_offset = cols == d ? 0 : 16;
      const int64_t rows = B * local - from;
      Vec y(size_t(rows * cols));
      dropout_forward(ones.data(), y.data(), rows, cols, s);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t g_row = from + r, b = g_row / local, pos = shard.position(g_row % local);
        for (int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(y[size_t(r * cols + c)], all[size_t((b * T + pos) * d + s.col_offset + c)])
              << "row " << r << " column " << c;
      }
    }
  }
}

// The mask is its definition (dropout.hpp): element e kept when half (e & 1) of word (e >> 1) & 3 of
// Philox block e >> 3 is at least the threshold; the AVX-512 kernel (where this CPU has it) and the
// portable one both give it, for windows at any offset and of any length, at the thresholds' edges.
TEST(Dropout, BothMaskKernelsDrawTheStreamsDefinition) {
  if (!dropout_vectorised()) std::printf("note: no AVX-512 here: the best kernel is the portable one\n");
  std::mt19937 g(24);
  const RandomStream st = dropout_stream(0x123456789abcull, 5, 7, 2, 11);
  auto defined = [&](int64_t e, uint32_t thr) -> uint8_t {
    return ((st.bits(uint64_t(e) >> 1) >> ((e & 1) * 16)) & 0xffffu) >= thr;
  };
  for (uint32_t thr : {0u, 1u, 6554u, 32768u, 65535u, 65536u}) {
    for (int trial = 0; trial < 20; ++trial) {
      const int64_t first = int64_t(g() % 100000), n = 1 + int64_t(g() % 9000);
      for (MaskKernel k : {MaskKernel::best, MaskKernel::portable}) {
        std::vector<uint8_t> keep(static_cast<size_t>(n));
        dropout_mask(st, thr, first, n, keep.data(), k);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(keep[size_t(i)], defined(first + i, thr))
              << "threshold " << thr << " element " << first + i << (k == MaskKernel::best ? " best" : " portable");
      }
      // the scaled run: x * scale where kept, else 0, by both kernels, in place too
      Vec x = randu(n, g), y(static_cast<size_t>(n)), z = x;
      dropout_scale_run(st, thr, 1.25f, first, n, x.data(), y.data(), MaskKernel::best);
      dropout_scale_run(st, thr, 1.25f, first, n, z.data(), z.data(), MaskKernel::portable);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[size_t(i)], defined(first + i, thr) ? x[size_t(i)] * 1.25f : 0.0f) << first + i;
        ASSERT_EQ(z[size_t(i)], y[size_t(i)]) << first + i;
      }
    }
  }
}
