// DataParallel on forked ranks: its buckets, the gradients averaged, and its figures telling the
// all-reduce's exposed time apart from a rank's wait for slower ranks (DataParallel::gather_figures).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/world.hpp"
#include "comm_test_util.hpp"
#include "parallel/ddp/ddp.hpp"

using namespace dtrain;
using dist_test::env_for;
using dist_test::failures;
using dist_test::run_ranks;

namespace {

const Millis kTimeout{60000};

// Units of the given sizes over one contiguous gradient buffer, as a model lays them out.
struct Units {
  explicit Units(const std::vector<int64_t>& sizes) {
    int64_t total = 0;
    for (int64_t n : sizes) total += n;
    params.resize(size_t(total));
    grads.resize(size_t(total));
    int64_t at = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      all.push_back(std::make_unique<Unit>("u" + std::to_string(i)));
      all.back()->add("w", {sizes[i]}, Init::zeros);
      all.back()->bind(params.data() + at, grads.data() + at);
      at += sizes[i];
    }
  }
  std::vector<Unit*> units() const {
    std::vector<Unit*> u;
    for (const auto& p : all) u.push_back(p.get());
    return u;
  }
  std::vector<std::unique_ptr<Unit>> all;
  std::vector<float> params, grads;
};

// One step of rank r: gradients r + 1 everywhere, backward (last unit first), the averages waited for.
void step(DataParallel& ddp, Units& m, int r) {
  std::fill(m.grads.begin(), m.grads.end(), float(r + 1));
  for (size_t k = m.all.size(); k-- > 0;) ddp.post_backward(*m.all[k]);
  ddp.finish_gradients();
}

}  // namespace

// The rank that ends backward first waits in the all-reduce for the other: each step one rank is
// late by 250 ms, in turn. Taken per step over the ranks, that wait is the ranks' imbalance, and
// the all-reduce's exposed time is the late rank's wait alone, far less (each rank's own total
// holds two late peers, so the least of the totals would not tell them apart).
TEST(DataParallel, AllreduceExposedIsToldApartFromWaitingForSlowerRanks) {
  auto rs = run_ranks(2, [](int r, int port) {
    World w(env_for(r, 2, port, "test-token"), kTimeout);
    Units m({1 << 16, 1 << 16});
    DataParallel ddp(m.units(), w.all(), 0);
    ddp.keep_step_figures(true);
    const int steps = 4;
    for (int s = 0; s < steps; ++s) {
      if (s % 2 == r) std::this_thread::sleep_for(std::chrono::milliseconds(250));
      step(ddp, m, r);
      RANK_CHECK(m.grads.front() == 1.5f && m.grads.back() == 1.5f, "gradients are the ranks' average");
    }
    const DdpStats& mine = ddp.stats();
    RANK_CHECK(mine.steps == steps && mine.exposed_seconds >= 0.4, "each rank waited for a late peer twice");
    const DdpFigures f = ddp.gather_figures();
    RANK_CHECK(f.steps == steps, "every step combined");
    RANK_CHECK(f.rank_wait_seconds >= 0.35 && f.rank_wait_seconds < 0.75,  // a rank's mean: 2 waits of 250 ms
               "rank wait " + std::to_string(f.rank_wait_seconds));
    RANK_CHECK(f.exposed_seconds < 0.5 * f.rank_wait_seconds && f.exposed_seconds < mine.exposed_seconds,
               "exposed " + std::to_string(f.exposed_seconds) + " s against " + std::to_string(f.rank_wait_seconds));
    RANK_CHECK(f.comm_seconds <= mine.comm_seconds && f.hidden_fraction() >= 0.0 && f.hidden_fraction() <= 1.0,
               "the least all-reduce time per step is no more than this rank's");
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "");
}

// Past DataParallel's record of 1024 steps the ranks fold what they kept and go on: every step is
// counted once; with figures off nothing is kept or exchanged.
TEST(DataParallel, FiguresCountEveryStepPastTheRecord) {
  auto rs = run_ranks(2, [](int r, int port) {
    World w(env_for(r, 2, port, "test-token"), kTimeout);
    Units m({16, 16});
    DataParallel kept(m.units(), w.all(), 0), not_kept(m.units(), w.all(), 0);
    kept.keep_step_figures(true);
    const int steps = 1030;
    for (int s = 0; s < steps; ++s) step(kept, m, r);
    step(not_kept, m, r);
    const DdpFigures f = kept.gather_figures();
    RANK_CHECK(f.steps == steps, "steps " + std::to_string(f.steps));
    RANK_CHECK(f.exposed_seconds <= kept.stats().exposed_seconds + 1e-6 && f.rank_wait_seconds >= 0.0, "least waits");
    RANK_CHECK(not_kept.gather_figures().steps == 0 && not_kept.stats().steps == 1, "figures off: none gathered");
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "");
}

// A bucket never grows past its size by taking in a larger unit: the units after it in backward
// would wait for that unit's backward (an embedding's, the last). Sizes in floats; bucket 1 MiB.
TEST(DataParallel, ALargeUnitStartsABucketOfItsOwn) {
  auto rs = run_ranks(1, [](int r, int port) {
    World w(env_for(r, 1, port, "test-token"), kTimeout);
    const size_t mib = size_t(1) << 20;
    Units embedding_first({300000, 100000, 100000});  // backward: 100k, 100k, then 300k would pass 262,144
    RANK_CHECK(DataParallel(embedding_first.units(), w.all(), mib).num_buckets() == 2, "[100k 100k] [300k]");
    Units small({50000, 50000, 50000});
    RANK_CHECK(DataParallel(small.units(), w.all(), mib).num_buckets() == 1, "150k floats: one bucket");
    Units large_last({100000, 400000});  // a unit larger than a bucket is a bucket alone
    RANK_CHECK(DataParallel(large_last.units(), w.all(), mib).num_buckets() == 2, "[400k] [100k]");
    // 4 MiB buckets, the first at most 1 MiB: the first closes before a 300k unit, which then
    // starts the second, a bucket of 4 MiB (1,048,576 floats) that takes the next 300k too
    Units second({300000, 300000, 100000});
    RANK_CHECK(DataParallel(second.units(), w.all(), 4 * mib).num_buckets() == 2, "[100k] [300k 300k]");
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "");
}
