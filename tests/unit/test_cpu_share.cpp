// A rank's share of the CPUs (core/cpu_share): CPU lists and cgroup quotas parsed, the share of a
// mask among local ranks (divided when shared, whole when a launcher bound it), a quota's limit, and
// dtrun --bind cores' shares of a mask.
#include <gtest/gtest.h>

#include <sched.h>

#include "core/cpu_share.hpp"

using namespace dtrain;

TEST(CpuShare, CpuListsParseAndFormat) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(parse_cpu_list("3,1,2-3"), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(parse_cpu_list("").empty());
  EXPECT_TRUE(parse_cpu_list("a-b").empty());
  EXPECT_TRUE(parse_cpu_list("4-2").empty());
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({7}), "7");
  EXPECT_EQ(format_cpu_list(parse_cpu_list("0-63")), "0-63");
}

TEST(CpuShare, CgroupV2QuotaInCpus) {
  EXPECT_EQ(parse_cpu_max("max 100000\n"), 0.0);
  EXPECT_DOUBLE_EQ(parse_cpu_max("150000 100000\n"), 1.5);
  EXPECT_DOUBLE_EQ(parse_cpu_max("400000 100000"), 4.0);
  EXPECT_EQ(parse_cpu_max(""), 0.0);
  EXPECT_EQ(parse_cpu_max("garbage"), 0.0);
}

TEST(CpuShare, ASharedMaskIsDividedAndAnOwnMaskIsNot) {
  CpuFacts f;
  f.mask = parse_cpu_list("0-15");
  f.pool = 16;
  EXPECT_EQ(share_of(f, 1).threads, 16);
  EXPECT_EQ(share_of(f, 4).threads, 4);  // bare srun or mpirun without binding: 4 ranks share 16 CPUs
  EXPECT_FALSE(share_of(f, 4).own_mask);
  EXPECT_EQ(share_of(f, 32).threads, 1);  // never fewer than one
  f.mask = parse_cpu_list("4-7");         // srun --cpu-bind=cores: this rank's own 4 of 16
  EXPECT_TRUE(share_of(f, 4).own_mask);
  EXPECT_EQ(share_of(f, 4).threads, 4);
  EXPECT_EQ(share_of(f, 4, /*shared=*/true).threads, 1);  // dtrun dividing its own 4 CPUs among 4 workers
  f.pool = 4;  // a job's cpuset of 4 CPUs shared by 2 unbound ranks
  EXPECT_EQ(share_of(f, 2).threads, 2);
  EXPECT_NE(share_of(f, 2).why.find("shared by 2 local ranks"), std::string::npos);
}

TEST(CpuShare, AQuotaLimitsTheShare) {
  CpuFacts f;
  f.mask = parse_cpu_list("0-7");
  f.pool = 8;
  f.quota_cpus = 2.5;
  EXPECT_EQ(share_of(f, 1).threads, 2);
  EXPECT_EQ(share_of(f, 2).threads, 1);
  EXPECT_NE(share_of(f, 1).why.find("cgroup CPU quota 2.5"), std::string::npos);
}

TEST(CpuShare, BindCoresGivesEachWorkerItsOwnEqualShare) {
  const std::vector<int> mask = parse_cpu_list("0-6");  // 7 CPUs, 3 workers: 2 each, one unused
  EXPECT_EQ(cpus_of_worker(mask, 0, 3), (std::vector<int>{0, 1}));
  EXPECT_EQ(cpus_of_worker(mask, 1, 3), (std::vector<int>{2, 3}));
  EXPECT_EQ(cpus_of_worker(mask, 2, 3), (std::vector<int>{4, 5}));
  const std::vector<int> two = parse_cpu_list("2,5");  // fewer CPUs than workers: one each, in turn
  EXPECT_EQ(cpus_of_worker(two, 0, 3), (std::vector<int>{2}));
  EXPECT_EQ(cpus_of_worker(two, 1, 3), (std::vector<int>{5}));
  EXPECT_EQ(cpus_of_worker(two, 2, 3), (std::vector<int>{2}));
}

TEST(CpuShare, ReadsThisProcessesAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const CpuFacts f = read_cpu_facts();
  EXPECT_EQ(int(f.mask.size()), CPU_COUNT(&set));
  EXPECT_GE(f.pool, 1);
  EXPECT_GE(f.quota_cpus, 0.0);
}
