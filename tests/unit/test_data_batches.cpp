// Data layer, batch side: window dataset, distributed sampler and the prefetching loader.
#include "data_test_util.hpp"

namespace {
// A token file holding 0, 1, ..., n-1.
std::string iota_file(const TempDir& d, int n) {
  std::vector<uint32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0u);
  std::string p = d / ("iota" + std::to_string(n) + ".bin");
  write_token_file(p, uint32_t(n + 1), ids, 0);
  return p;
}
}  // namespace

TEST(WindowDataset, WindowsAndStride) {
  TempDir d;
  TokenFile f(iota_file(d, 20));
  WindowDataset ds(f, 4, 1);
  EXPECT_EQ(ds.size(), 16);
  std::vector<int32_t> in(4), tg(4);
  for (int64_t i = 0; i < ds.size(); ++i) {
    ds.get(i, in.data(), tg.data());
    for (int t = 0; t < 4; ++t) {
      EXPECT_EQ(in[t], i + t);
      EXPECT_EQ(tg[t], in[t] + 1);
    }
  }
  WindowDataset s3(f, 4, 3);
  EXPECT_EQ(s3.size(), 6);  // starts 0, 3, ..., 15
  s3.get(5, in.data(), tg.data());
  EXPECT_EQ(in, (std::vector<int32_t>{15, 16, 17, 18}));
  EXPECT_EQ(tg, (std::vector<int32_t>{16, 17, 18, 19}));
  WindowDataset exact(f, 19, 1);
  EXPECT_EQ(exact.size(), 1);
}

TEST(WindowDataset, Errors) {
  TempDir d;
  TokenFile f(iota_file(d, 4));
  expect_error([&] { WindowDataset ds(f, 4, 1); }, "has only 4 tokens, fewer than seq_len+1 = 5");
  expect_error([&] { WindowDataset ds(f, 0, 1); }, "seq_len");
  expect_error([&] { WindowDataset ds(f, 2, 0); }, "stride");
}

TEST(Sampler, CoversEveryIndexWithPadding) {
  for (int64_t n : {1, 7, 10, 11, 12}) {
    for (int R : {1, 2, 3}) {
      for (bool shuffle : {false, true}) {
        std::map<int64_t, int> seen;
        int64_t per_rank = (n + R - 1) / R;
        for (int r = 0; r < R; ++r) {
          DistributedSampler s(n, shuffle, 42, R, r);
          s.set_epoch(3);
          ASSERT_EQ(s.size(), per_rank);
          for (int64_t i : s.indices()) ++seen[i];
        }
        ASSERT_EQ(int64_t(seen.size()), n) << "n=" << n << " R=" << R;
        std::vector<int64_t> order;
        DistributedSampler::permutation(n, 42, 3, order);
        if (!shuffle) std::iota(order.begin(), order.end(), int64_t(0));
        // Padding repeats the order from its start (more than once when total > 2n).
        const int64_t total = per_rank * R;
        for (int64_t k = 0; k < n; ++k) {
          int64_t want = total / n + (k < total % n ? 1 : 0);
          EXPECT_EQ(seen[order[size_t(k)]], want) << "n=" << n << " R=" << R << " k=" << k;
        }
      }
    }
  }
}

TEST(Sampler, DropLastAndRankStriding) {
  for (int R : {1, 2, 3}) {
    std::set<int64_t> seen;
    for (int r = 0; r < R; ++r) {
      DistributedSampler s(11, true, 7, R, r, /*drop_last=*/true);
      EXPECT_EQ(s.size(), 11 / R);
      for (int64_t i : s.indices()) EXPECT_TRUE(seen.insert(i).second);
    }
    EXPECT_EQ(int64_t(seen.size()), (11 / R) * R);
  }
  DistributedSampler plain(10, false, 0, 3, 1);
  EXPECT_EQ(plain.indices(), (std::vector<int64_t>{1, 4, 7, 0}));  // positions 1, 4, 7, 10 -> 10 % 10 = 0
  DistributedSampler tiny(2, true, 0, 4, 3);                       // pad repeats the order more than once
  EXPECT_EQ(tiny.size(), 1);
}

TEST(Sampler, WithoutPaddingEveryIndexOnceAcrossRanks) {
  for (int64_t n : {0, 1, 7, 12}) {
    for (int R : {1, 3, 4}) {
      std::multiset<int64_t> seen;
      for (int r = 0; r < R; ++r) {
        DistributedSampler s(n, true, 5, R, r, false, /*pad=*/false);
        EXPECT_LE(std::abs(s.size() - n / R), 1);
        for (int64_t i : s.indices()) seen.insert(i);
      }
      ASSERT_EQ(int64_t(seen.size()), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen.count(i), 1u) << "n=" << n << " R=" << R;
    }
  }
}

TEST(Sampler, EachRanksShareIsReshuffledPerEpoch) {
  DistributedSampler r0(100, true, 1, 4, 0), r1(100, true, 1, 4, 1);
  const auto a0 = r0.indices(), a1 = r1.indices();
  r0.set_epoch(1);
  r1.set_epoch(1);
  EXPECT_NE(r0.indices(), a0);
  EXPECT_NE(r1.indices(), a1);
  std::set<int64_t> both(r0.indices().begin(), r0.indices().end());
  for (int64_t i : r1.indices()) EXPECT_TRUE(both.insert(i).second);  // still disjoint
}

TEST(Sampler, ReshufflesAcrossEpochsDeterministically) {
  DistributedSampler a(1000, true, 1), b(1000, true, 1), c(1000, true, 2);
  EXPECT_EQ(a.indices(), b.indices());
  EXPECT_NE(a.indices(), c.indices());
  std::vector<int64_t> e0 = a.indices();
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[size_t(i)], i);
  a.set_epoch(1);
  EXPECT_NE(a.indices(), e0);
  a.set_epoch(0);
  EXPECT_EQ(a.indices(), e0);
  a.set_epoch(int64_t(1) << 40);  // high epoch bits matter
  std::vector<int64_t> hi = a.indices();
  a.set_epoch(0);
  EXPECT_NE(hi, a.indices());

  // Rough uniformity: where does element 0 land over many epochs?
  std::vector<int> pos(3, 0);
  DistributedSampler u(3, true, 9);
  for (int e = 0; e < 3000; ++e) {
    u.set_epoch(e);
    ++pos[size_t(std::find(u.indices().begin(), u.indices().end(), 0) - u.indices().begin())];
  }
  for (int p : pos) EXPECT_NEAR(p, 1000, 150);
}

TEST(Sampler, Errors) {
  expect_error([] { DistributedSampler s(10, true, 0, 2, 2); }, "rank 2");
  expect_error([] { DistributedSampler s(10, true, 0, 0, 0); }, "replicas");
  expect_error([] { DistributedSampler s(-1, true, 0); }, "negative");
}

TEST(BatchLoader, YieldsAllSamplesAndPartialBatch) {
  TempDir d;
  TokenFile f(iota_file(d, 53));
  WindowDataset ds(f, 3, 1);  // 50 windows
  ASSERT_EQ(ds.size(), 50);
  DistributedSampler s(ds.size(), true, 5);
  for (bool prefetch : {true, false}) {
    for (bool drop_last : {false, true}) {
      BatchLoader loader(ds, s, 8, drop_last, prefetch);
      EXPECT_EQ(loader.num_batches(), drop_last ? 6 : 7);
      for (int epoch = 0; epoch < 2; ++epoch) {
        loader.start_epoch();
        Batch b;
        std::vector<int64_t> order;
        int64_t batches = 0;
        while (loader.next(b)) {
          ++batches;
          EXPECT_EQ(b.shape.inputs, 3);
          EXPECT_EQ(int64_t(b.tokens.size()), b.samples * 3);
          EXPECT_EQ(int64_t(b.sample_index.size()), b.samples);
          for (int64_t r = 0; r < b.samples; ++r) {
            int64_t idx = b.sample_index[size_t(r)];
            order.push_back(idx);
            for (int t = 0; t < 3; ++t) {
              EXPECT_EQ(b.tokens[size_t(r * 3 + t)], idx + t);
              EXPECT_EQ(b.targets[size_t(r * 3 + t)], idx + t + 1);
            }
          }
          if (batches == 7) {
            EXPECT_EQ(b.samples, 2);
          }
        }
        EXPECT_FALSE(loader.next(b));  // stays at the end
        EXPECT_EQ(batches, loader.num_batches());
        std::vector<int64_t> want(s.indices().begin(), s.indices().begin() + (drop_last ? 48 : 50));
        EXPECT_EQ(order, want);  // sampler order
      }
    }
  }
}

TEST(BatchLoader, NoAllocationAfterFirstBatch) {
  TempDir d;
  TokenFile f(iota_file(d, 200));
  WindowDataset ds(f, 16, 1);
  DistributedSampler s(ds.size(), true, 1, 2, 1);
  BatchLoader loader(ds, s, 10, false);
  Batch b;
  const int32_t* in_ptr = nullptr;
  const int32_t* tg_ptr = nullptr;
  const int64_t* ix_ptr = nullptr;
  for (int epoch = 0; epoch < 3; ++epoch) {
    s.set_epoch(epoch);
    loader.start_epoch();
    std::set<int64_t> seen;
    while (loader.next(b)) {
      if (!in_ptr) {
        in_ptr = b.tokens.data();
        tg_ptr = b.targets.data();
        ix_ptr = b.sample_index.data();
      }
      EXPECT_EQ(b.tokens.data(), in_ptr);
      EXPECT_EQ(b.targets.data(), tg_ptr);
      EXPECT_EQ(b.sample_index.data(), ix_ptr);
      for (int64_t i : b.sample_index) seen.insert(i);
    }
    EXPECT_EQ(int64_t(seen.size()), s.size());
  }
}

TEST(BatchLoader, StopsCleanlyMidEpoch) {
  TempDir d;
  TokenFile f(iota_file(d, 5000));
  WindowDataset ds(f, 32, 1);
  DistributedSampler s(ds.size(), true, 3);
  Batch b;
  {
    BatchLoader loader(ds, s, 4, false);
    loader.start_epoch();
    ASSERT_TRUE(loader.next(b));
    loader.start_epoch();  // restart mid-epoch: the old worker is joined
    ASSERT_TRUE(loader.next(b));
    EXPECT_EQ(b.sample_index[0], s.indices()[0]);
  }  // destroyed mid-epoch
  {
    BatchLoader loader(ds, s, 4, false);
    loader.start_epoch();  // destroyed before any next()
  }
  BatchLoader never_started(ds, s, 4, false);
  SUCCEED();
}

TEST(BatchLoader, Errors) {
  TempDir d;
  TokenFile f(iota_file(d, 20));
  WindowDataset ds(f, 4, 1);
  DistributedSampler s(ds.size(), false, 0);
  DistributedSampler wrong(ds.size() + 1, false, 0);
  expect_error([&] { BatchLoader l(ds, s, 0, false); }, "batch size");
  expect_error([&] { BatchLoader l(ds, wrong, 2, false); }, "sampler covers 17 samples but the dataset has only 16");
}

namespace {
// An images-kind dataset small enough to check by hand: sample i has C×H×W = 2×2×3 pixels
// i + p/16 (p = 0..11, exact in float) and the label (7i) mod 10.
struct TinyImages : Dataset {
  static constexpr int64_t kPixels = 2 * 2 * 3;
  int64_t n;
  explicit TinyImages(int64_t n) : n(n) {}
  int64_t size() const override { return n; }
  SampleShape shape() const override { return {InputKind::images, kPixels, 1}; }
  void get(int64_t i, void* inputs, int32_t* targets) const override {
    float* px = static_cast<float*>(inputs);
    for (int64_t p = 0; p < kPixels; ++p) px[p] = pixel(i, p);
    targets[0] = label(i);
  }
  static float pixel(int64_t i, int64_t p) { return float(i) + float(p) / 16.0f; }
  static int32_t label(int64_t i) { return int32_t((7 * i) % 10); }
};
}  // namespace

TEST(Dataset, WindowDatasetThroughTheInterfaceGivesTheSameSamples) {
  TempDir d;
  TokenFile f(iota_file(d, 30));
  WindowDataset ds(f, 5, 2);
  const Dataset& base = ds;
  EXPECT_EQ(base.size(), ds.size());
  EXPECT_EQ(base.size(), 13);  // starts 0, 2, ..., 24
  EXPECT_EQ(base.shape(), (SampleShape{InputKind::tokens, 5, 5}));
  std::vector<int32_t> in(5), tg(5), typed_in(5), typed_tg(5);
  for (int64_t i = 0; i < base.size(); ++i) {
    std::fill(in.begin(), in.end(), -1);
    std::fill(tg.begin(), tg.end(), -1);
    base.get(i, static_cast<void*>(in.data()), tg.data());
    ds.get(i, typed_in.data(), typed_tg.data());
    EXPECT_EQ(in, typed_in) << i;
    EXPECT_EQ(tg, typed_tg) << i;
    for (int t = 0; t < 5; ++t) {
      EXPECT_EQ(in[size_t(t)], 2 * i + t);
      EXPECT_EQ(tg[size_t(t)], 2 * i + t + 1);
    }
  }
}

TEST(BatchLoader, ImagesDatasetGivesPixelsAndLabelsInSamplerOrder) {
  TinyImages ds(11);
  const int64_t P = TinyImages::kPixels;
  DistributedSampler s(ds.size(), true, 9);
  for (bool prefetch : {true, false}) {
    BatchLoader loader(ds, s, 4, false, prefetch);
    EXPECT_EQ(loader.num_batches(), 3);
    std::vector<int64_t> first_epoch;
    for (int epoch = 0; epoch < 2; ++epoch) {
      s.set_epoch(epoch);
      loader.start_epoch();
      Batch b;
      std::vector<int64_t> order, sizes;
      const float* px_ptr = nullptr;
      while (loader.next(b)) {
        sizes.push_back(b.samples);
        EXPECT_EQ(b.shape, ds.shape());
        EXPECT_TRUE(b.tokens.empty());
        ASSERT_EQ(int64_t(b.pixels.size()), b.samples * P);
        ASSERT_EQ(int64_t(b.targets.size()), b.samples);
        ASSERT_EQ(int64_t(b.sample_index.size()), b.samples);
        if (!px_ptr) px_ptr = b.pixels.data();
        EXPECT_EQ(b.pixels.data(), px_ptr);  // storage reused across batches
        for (int64_t r = 0; r < b.samples; ++r) {
          const int64_t idx = b.sample_index[size_t(r)];
          order.push_back(idx);
          EXPECT_EQ(b.targets[size_t(r)], TinyImages::label(idx)) << "sample " << idx;
          for (int64_t p = 0; p < P; ++p) EXPECT_EQ(b.pixels[size_t(r * P + p)], TinyImages::pixel(idx, p));
        }
        const BatchView v = b.view();
        EXPECT_EQ(v.shape, b.shape);
        EXPECT_EQ(v.samples, b.samples);
        EXPECT_EQ(v.pixels(), b.pixels.data());
        EXPECT_EQ(v.targets, b.targets.data());
      }
      EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 3}));
      EXPECT_EQ(order, s.indices()) << "prefetch " << prefetch;
      if (epoch == 0) first_epoch = order;
      else EXPECT_NE(order, first_epoch);  // the loader follows the sampler's new order
    }
  }
}

TEST(BatchLoader, ABatchReusedForAnotherKindHoldsOnlyThatKindsInputs) {
  TempDir d;
  TokenFile f(iota_file(d, 20));
  WindowDataset windows(f, 4, 1);
  TinyImages images(5);
  DistributedSampler sw(windows.size(), false, 0), si(images.size(), false, 0);
  for (bool prefetch : {true, false}) {
    Batch b;
    BatchLoader lw(windows, sw, 3, false, prefetch);
    lw.start_epoch();
    ASSERT_TRUE(lw.next(b));
    EXPECT_EQ(b.tokens.size(), 12u);
    EXPECT_TRUE(b.pixels.empty());
    BatchLoader li(images, si, 3, false, prefetch);
    li.start_epoch();
    ASSERT_TRUE(li.next(b));
    EXPECT_EQ(b.shape.input, InputKind::images);
    EXPECT_TRUE(b.tokens.empty());
    EXPECT_EQ(b.pixels.size(), size_t(3 * TinyImages::kPixels));
    EXPECT_EQ(b.targets, (std::vector<int32_t>{0, 7, 4}));
    lw.start_epoch();
    ASSERT_TRUE(lw.next(b));
    EXPECT_EQ(b.shape.input, InputKind::tokens);
    EXPECT_TRUE(b.pixels.empty());
    EXPECT_EQ(b.tokens, (std::vector<int32_t>{0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5}));
  }
}

TEST(BatchView, SliceAndKindChecks) {
  Batch img;
  img.shape = {InputKind::images, 3, 1};
  img.samples = 5;
  img.pixels.resize(15);
  img.targets.resize(5);
  const BatchView v = img.view();
  EXPECT_EQ(v.inputs, static_cast<const void*>(img.pixels.data()));
  EXPECT_THROW(v.tokens(), std::logic_error);
  const BatchView s = v.slice(2, 3);
  EXPECT_EQ(s.shape, v.shape);
  EXPECT_EQ(s.samples, 3);
  EXPECT_EQ(s.pixels(), img.pixels.data() + 6);
  EXPECT_EQ(s.targets, img.targets.data() + 2);
  const BatchView inner = s.slice(1, 1);  // a slice of a slice counts from its own start
  EXPECT_EQ(inner.pixels(), img.pixels.data() + 9);
  EXPECT_EQ(inner.targets, img.targets.data() + 3);
  const BatchView whole = v.slice(0, 5), end = v.slice(5, 0);
  EXPECT_EQ(whole.pixels(), img.pixels.data());
  EXPECT_EQ(whole.samples, 5);
  EXPECT_EQ(end.samples, 0);
  EXPECT_EQ(end.pixels(), img.pixels.data() + 15);
  EXPECT_THROW(v.slice(3, 3), std::logic_error);
  EXPECT_THROW(v.slice(-1, 1), std::logic_error);
  EXPECT_THROW(v.slice(0, -1), std::logic_error);

  Batch tok;  // tokens: inputs and targets advance by their own widths
  tok.shape = {InputKind::tokens, 4, 2};
  tok.samples = 3;
  tok.tokens.resize(12);
  tok.targets.resize(6);
  const BatchView t = tok.view().slice(1, 2);
  EXPECT_EQ(t.tokens(), tok.tokens.data() + 4);
  EXPECT_EQ(t.targets, tok.targets.data() + 2);
  EXPECT_EQ(t.samples, 2);
  EXPECT_THROW(t.pixels(), std::logic_error);
}
