// data.mix: each source's share of every period is its weight's, interleaved evenly; sample i is the
// same function of i wherever it is asked for; sources repeat in order past their size; the weights'
// refusals; ConcatDataset; epochs that read on.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "data/loader.hpp"
#include "data/mix.hpp"
#include "data/mix_source.hpp"
#include "data/sampler.hpp"
#include "data_test_util.hpp"

using namespace dtrain;

namespace {

// Sample i of source s: one token, s * 1000 + i.
class Counting : public Dataset {
 public:
  Counting(int s, int64_t n) : s_(s), n_(n) {}
  int64_t size() const override { return n_; }
  SampleShape shape() const override { return {InputKind::tokens, 1, 1}; }
  void get(int64_t i, void* inputs, int32_t* targets) const override {
    static_cast<int32_t*>(inputs)[0] = int32_t(s_ * 1000 + i);
    targets[0] = 0;
  }

 private:
  int s_;
  int64_t n_;
};

int32_t sample(const Dataset& d, int64_t i) {
  int32_t in = -1, target = -1;
  d.get(i, &in, &target);
  return in;
}

}  // namespace

TEST(DataMix, SharesFollowTheWeightsAndInterleave) {
  const Counting a(0, 500), b(1, 300), c(2, 40);
  const MixDataset mix({&a, &b, &c}, {0.5, 0.3, 0.2}, 840);
  const int64_t period = MixDataset::kMixPeriod;
  EXPECT_EQ(mix.drawn(0, period), period / 2);
  EXPECT_NEAR(double(mix.drawn(1, period)), 0.3 * double(period), 1.0);
  EXPECT_NEAR(double(mix.drawn(2, period)), 0.2 * double(period), 1.0);
  EXPECT_EQ(mix.drawn(0, period) + mix.drawn(1, period) + mix.drawn(2, period), period);
  // evenly: after any n samples each source is within one sample of its share
  for (int64_t n : {1, 2, 3, 10, 97, 1000, 4321}) {
    EXPECT_NEAR(double(mix.drawn(0, n)), 0.5 * double(n), 1.0) << n;
    EXPECT_NEAR(double(mix.drawn(2, n)), 0.2 * double(n), 1.0) << n;
  }
  // draws count up per source; a source past its size starts again, in order
  std::vector<int64_t> next(3, 0);
  for (int64_t i = 0; i < 840; ++i) {
    const MixDataset::Draw d = mix.draw(i);
    ASSERT_EQ(d.draw, next[size_t(d.source)]++) << i;
    const int64_t size[] = {500, 300, 40};
    EXPECT_EQ(sample(mix, i), d.source * 1000 + d.draw % size[d.source]);
  }
  // the next period repeats the pattern, continuing each source's draws
  EXPECT_EQ(mix.draw(period + 5).source, mix.draw(5).source);
  EXPECT_EQ(mix.draw(period + 5).draw, mix.draw(5).draw + mix.drawn(mix.draw(5).source, period));
}

TEST(DataMix, OneSourceIsItself) {
  const Counting a(0, 10);
  const MixDataset mix({&a}, {3.0}, 10);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(sample(mix, i), i);
}

TEST(DataMix, ConcatenatesInOrder) {
  const Counting a(0, 3), b(1, 2);
  const ConcatDataset all({&a, &b});
  EXPECT_EQ(all.size(), 5);
  const std::vector<int32_t> want = {0, 1, 2, 1000, 1001};
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(sample(all, i), want[size_t(i)]);
}

TEST(DataMix, ParsesAndRefusesWeights) {
  const std::vector<MixEntry> m = parse_mix(R"([{"dir": "a", "weight": 0.7}, {"dir": "b", "weight": 0}, {"dir": "c", "weight": 2}])");
  ASSERT_EQ(m.size(), 2u);  // a weight of 0 leaves its source out
  EXPECT_EQ(m[0].dir, "a");
  EXPECT_EQ(m[1].weight, 2.0);
  expect_error([] { parse_mix(R"([{"dir": "a", "weight": -1}])"); }, "weights are numbers ≥ 0");
  expect_error([] { parse_mix(R"([{"dir": "a", "weight": 0}])"); }, "the weights sum to zero");
  expect_error([] { parse_mix(R"([{"dir": "a", "weight": 1}, {"dir": "a", "weight": 1}])"); }, "names a twice");
  expect_error([] { parse_mix(R"([{"dir": "a"}])"); }, "is not {dir = ");
  expect_error([] { parse_mix(R"({"dir": "a"})"); }, "is not a list of sources");
  const Counting a(0, 5), b(1, 5);
  expect_error([&] { MixDataset({&a, &b}, {1.0, 1e-9}, 10); }, "is less than one sample in");
}

TEST(DataMix, GoesOnAcrossEpochs) {
  // a large source downsampled to half of a small mix: each epoch reads on into it, not from its start
  const Counting a(0, 100), b(1, 10);
  const MixDataset mix({&a, &b}, {0.5, 0.5}, 20);
  DistributedSampler sampler(mix.size(), false, 1);
  BatchLoader loader(mix, sampler, 20, false, false);
  std::vector<int32_t> seen;
  Batch batch;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    sampler.set_epoch(epoch);
    loader.start_epoch();
    while (loader.next(batch))
      for (int32_t v : batch.tokens)
        if (v < 1000) seen.push_back(v);
  }
  std::vector<int32_t> want(30);
  std::iota(want.begin(), want.end(), 0);  // a's samples 0..29 over three epochs of 10 each
  EXPECT_EQ(seen, want);
}
