// train.global_batch's split over the data-parallel ranks: the fewest micro-steps within the per-rank
// bound, the same global batch at every size that divides it, and one line for one that does not.
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "train/global_batch.hpp"

using namespace dtrain;

TEST(GlobalBatch, FewestMicroStepsWithinThePerRankBound) {
  BatchSplit s = split_global_batch(16, 1, 4);
  EXPECT_EQ(s.micro_batch, 4);
  EXPECT_EQ(s.accum, 4);
  s = split_global_batch(16, 2, 8);
  EXPECT_EQ(s.micro_batch, 8);
  EXPECT_EQ(s.accum, 1);
  s = split_global_batch(16, 2, 100);  // the bound is a most, not a target
  EXPECT_EQ(s.micro_batch, 8);
  EXPECT_EQ(s.accum, 1);
  // 24 per rank, at most 5 each: 5 micro-steps would not divide 24; 6 of 4 do
  s = split_global_batch(48, 2, 5);
  EXPECT_EQ(s.micro_batch, 4);
  EXPECT_EQ(s.accum, 6);
  // a prime per-rank count only splits into single samples
  s = split_global_batch(13, 1, 4);
  EXPECT_EQ(s.micro_batch, 1);
  EXPECT_EQ(s.accum, 13);
  EXPECT_EQ(split_global_batch(32, 2, 4).describe(2),
            "global batch 32 = 2 data-parallel ranks × 4 samples × 4 micro-steps");
  EXPECT_EQ(split_global_batch(1, 1, 4).describe(1), "global batch 1 = 1 data-parallel rank × 1 sample × 1 micro-step");
}

TEST(GlobalBatch, EverySizeThatDividesItKeepsTheGlobalBatch) {
  for (int dp = 1; dp <= 12; ++dp) {
    const int64_t G = 240;
    if (G % dp != 0) continue;
    for (int64_t bound : {1, 3, 7, 16, 240}) {
      const BatchSplit s = split_global_batch(G, dp, bound);
      EXPECT_EQ(s.global(dp), G) << dp << " " << bound;
      EXPECT_LE(s.micro_batch, bound);
      // no fewer micro-steps would do: each smaller count either exceeds the bound or does not divide
      for (int64_t a = 1; a < s.accum; ++a)
        EXPECT_TRUE(G / dp % a != 0 || G / dp / a > bound) << dp << " " << bound << " " << a;
    }
  }
  // a large global batch splits fast (divisors up to its square root)
  EXPECT_EQ(split_global_batch(int64_t(1) << 30, 8, 1000).global(8), int64_t(1) << 30);
}

TEST(GlobalBatch, ASizeThatDoesNotDivideItIsOneLine) {
  const std::string e = error_of([] { split_global_batch(30, 4, 8); });
  EXPECT_EQ(e,
            "train.global_batch = 30 does not split over 4 data-parallel ranks: give a multiple of 4 (28 or 32), "
            "or leave train.global_batch unset");
  EXPECT_NE(error_of([] { split_global_batch(3, 4, 8); }).find("(4)"), std::string::npos);
}

TEST(GlobalBatch, UnsetKeepsBatchSizeAndGradAccumAsGiven) {
  const BatchSplit s = run_batch_split(0, 6, 3, 4);
  EXPECT_EQ(s.micro_batch, 6);
  EXPECT_EQ(s.accum, 3);
  EXPECT_EQ(s.global(4), 72);
  EXPECT_EQ(run_batch_split(16, 4, 1, 1).accum, 4);
}

TEST(GlobalBatch, AnElasticJobChecksEverySizeItMayComeTo) {
  // 2 to 4 nodes of 4 workers: 8, 12 and 16 data-parallel ranks keep a multiple of 48
  EXPECT_NO_THROW(require_split_at_every_size(96, 2, 4, 4, 1));
  EXPECT_EQ(error_of([] { require_split_at_every_size(8192, 2, 4, 4, 1); }),
            "train.global_batch = 8192 does not split over the 12 data-parallel ranks of 3 nodes, a size this elastic "
            "job (--nnodes 2:4, 4 workers each) may come to: give a multiple of 48 (e.g. 8208), which every size keeps");
  // with tp × pp = 8 a 3-node world does not fit the mesh at all (the mesh says so): 1 and 2 copies remain
  EXPECT_NO_THROW(require_split_at_every_size(2, 2, 4, 4, 8));
}

TEST(GlobalBatch, ElasticJobHoldsWholeCopiesAtEverySize) {
  EXPECT_NO_THROW(require_copies_at_every_size(1, 4, 2, 2, 1));  // 2, 4, 6, 8 workers: tp 2 fits each
  EXPECT_NO_THROW(require_copies_at_every_size(2, 2, 1, 2, 1));  // fixed at 2 nodes of 1 worker
  // tp 2 × pp 2 = 4 ranks per copy: 3 nodes of 2 workers (6) cannot hold whole copies
  EXPECT_EQ(error_of([] { require_copies_at_every_size(2, 4, 2, 2, 2); }),
            "parallel.tp × parallel.pp = 2 × 2 ranks per model copy do not fit the 6 workers of 3 nodes, a size this "
            "elastic job (--nnodes 2:4, 2 workers each) may come to: raise MIN to a size they fit, or lower "
            "parallel.tp / parallel.pp");
  EXPECT_NE(error_of([] { require_copies_at_every_size(1, 2, 1, 2, 1); }).find("the 1 worker of 1 node"),
            std::string::npos);
  // context parallel: a copy is tp × cp × pp ranks, and the error names cp
  EXPECT_NO_THROW(require_copies_at_every_size(1, 3, 4, 2, 1, 2));  // 4, 8, 12 workers: 4 per copy
  const std::string cp = error_of([] { require_copies_at_every_size(1, 2, 2, 1, 1, 4); });
  EXPECT_NE(cp.find("parallel.tp × parallel.cp × parallel.pp = 1 × 4 × 1 ranks per model copy do not fit the 2 workers"),
            std::string::npos) << cp;
}
