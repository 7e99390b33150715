// The resource sampler: /proc parsers on fixed text, a live sampler on this process (memory, threads,
// CPU use while the test spins, take(), prompt stop), the gather over local ranks, and the JSON of
// records and maxima.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "comm_test_util.hpp"
#include "core/error.hpp"
#include "core/host_name.hpp"
#include "core/limits.hpp"
#include "error_of.hpp"
#include "metrics/proc_stats.hpp"
#include "metrics/resource_gather.hpp"
#include "metrics/resource_json.hpp"
#include "metrics/resource_sampler.hpp"

using namespace dtrain;
using dist_test::env_for;
using dist_test::failures;
using dist_test::run_ranks;

namespace {

using SteadyClock = std::chrono::steady_clock;

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// Waits (up to a minute, for a loaded machine) until the sampler's thread has queued a sample.
std::vector<ResourceSample> wait_for_samples(ResourceSampler& s, size_t n) {
  std::vector<ResourceSample> got;
  const auto t0 = SteadyClock::now();
  while (got.size() < n && seconds_since(t0) < 60) {
    for (auto& x : s.take()) got.push_back(x);
    if (got.size() < n) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return got;
}

ResourceSample sample(int rank, double t, int64_t step, double cpu, double rss) {
  ResourceSample s;
  s.rank = rank;
  s.t = t;
  s.step = step;
  s.cpu_percent = cpu;
  s.rss_mb = rss;
  s.threads = 4 + rank;
  return s;
}

}  // namespace

TEST(ProcStats, StatCountsFieldsFromTheLastParenthesisOfTheName) {
  // The name holds spaces and parentheses, and ends in "))": utime 250, stime 75, starttime 98765.
  const char* stat =
      "4321 (my (odd) name)) S 1 4321 4321 0 -1 4194560 1500 0 2 0 250 75 0 0 20 0 3 0 98765 123456789 2000 "
      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  const auto t = parse_proc_stat(stat);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->user, 250);
  EXPECT_EQ(t->system, 75);
  EXPECT_EQ(t->start, 98765);

  EXPECT_FALSE(parse_proc_stat("no parenthesis at all 1 2 3").has_value());
  EXPECT_FALSE(parse_proc_stat("12 (short) S 1 2 3 4 5").has_value());  // cut before starttime
  EXPECT_FALSE(
      parse_proc_stat("12 (x) S 1 2 3 4 5 6 7 8 9 10 ab 75 0 0 20 0 3 0 98765").has_value());  // utime not a number
}

TEST(ProcStats, StatusGivesResidentMemoryAndThreads) {
  const char* status =
      "Name:\tdtrain\nState:\tS (sleeping)\nVmPeak:\t  999999 kB\nVmRSS:\t   20480 kB\nRssAnon:\t   10000 kB\n"
      "Threads:\t7\nSigQ:\t0/62795\n";
  const ProcStatus s = parse_proc_status(status);
  ASSERT_TRUE(s.rss_mb.has_value());
  EXPECT_DOUBLE_EQ(*s.rss_mb, 20.0);
  ASSERT_TRUE(s.threads.has_value());
  EXPECT_EQ(*s.threads, 7);

  const ProcStatus none = parse_proc_status("Name:\tkthread\nVmRSSx:\t5 kB\n");  // a kernel thread has no VmRSS
  EXPECT_FALSE(none.rss_mb.has_value());
  EXPECT_FALSE(none.threads.has_value());
}

TEST(ProcStats, IoGivesStorageBytesAndIsAbsentWhenIncomplete) {
  const char* io =
      "rchar: 99999999\nwchar: 88888888\nsyscr: 10\nsyscw: 20\nread_bytes: 3145728\nwrite_bytes: 524288\n"
      "cancelled_write_bytes: 1048576\n";
  const auto p = parse_proc_io(io);
  ASSERT_TRUE(p.has_value());
  EXPECT_DOUBLE_EQ(p->read_mb, 3.0);   // read_bytes, not rchar
  EXPECT_DOUBLE_EQ(p->write_mb, 0.5);  // write_bytes, not cancelled_write_bytes
  EXPECT_FALSE(parse_proc_io("rchar: 1\nwchar: 2\n").has_value());
  EXPECT_FALSE(parse_proc_io("").has_value());
}

TEST(ProcStats, UptimeIsTheFirstNumber) {
  const auto up = parse_proc_uptime("12345.67 4567.89\n");
  ASSERT_TRUE(up.has_value());
  EXPECT_DOUBLE_EQ(*up, 12345.67);
  EXPECT_FALSE(parse_proc_uptime("up a while").has_value());
}

TEST(ProcStats, ReadsThisProcessAndNotAMissingFile) {
  const auto stat = read_proc_file("/proc/self/stat");
  ASSERT_TRUE(stat.has_value());
  EXPECT_TRUE(parse_proc_stat(*stat).has_value());
  EXPECT_FALSE(read_proc_file("/proc/self/no-such-file").has_value());
}

TEST(ResourceSampler, SamplesThisProcess) {
  ResourceSampler sampler(3600, 2, [] { return 42.5; });
  sampler.set_step(7);
  const ResourceSample s = sampler.sample_now();
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.t, 42.5);
  EXPECT_EQ(s.step, 7);
  ASSERT_TRUE(s.rss_mb.has_value());
  EXPECT_GT(*s.rss_mb, 0.0);
  ASSERT_TRUE(s.threads.has_value());
  EXPECT_GE(*s.threads, 2);                                                       // this one and the sampler's
  EXPECT_EQ(s.read_mb.has_value(), read_proc_file("/proc/self/io").has_value());  // absent where unreadable
  EXPECT_FALSE(s.gpu_util_percent.has_value());                                   // no probe given
  EXPECT_FALSE(s.gpu_mem_mb.has_value());
}

TEST(ResourceSampler, CpuPercentCountsTheTimeThisThreadSpins) {
  ResourceSampler sampler(3600, 0, [] { return 0.0; });
  ASSERT_EQ(wait_for_samples(sampler, 1).size(), 1u);  // the thread's first sample is the baseline...
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto t0 = SteadyClock::now();
  sampler.sample_now();  // ...until this one, over 0.1 s later, takes its place
  const double cpu0 = thread_cpu_seconds();
  volatile double sink = 0.0;
  while (thread_cpu_seconds() - cpu0 < 0.3)
    for (int i = 0; i < 10000; ++i) sink = sink + std::sqrt(double(i));
  const ResourceSample s = sampler.sample_now();
  const double wall = seconds_since(t0);  // at least the span the sample measured
  ASSERT_TRUE(s.cpu_percent.has_value());
  // The process used at least the 0.3 s this thread spun (less the rounding to 10 ms ticks and the
  // scheduler's accounting lag), over at most `wall` seconds: whatever else loads the machine, the
  // percentage times the wall time shows it.
  EXPECT_GE(*s.cpu_percent / 100.0 * wall, 0.25) << *s.cpu_percent << "% over " << wall << " s";
  EXPECT_LE(*s.cpu_percent, 100.0 * usable_cpus() + 20.0);  // no more than every CPU it may use (and rounding)
}

TEST(ResourceSampler, TakeDrainsTheQueueInOrder) {
  int calls = 0;
  ResourceSampler sampler(0.02, 1, [&calls] { return double(++calls); });  // t counts the samples
  const auto got = wait_for_samples(sampler, 3);
  ASSERT_GE(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].rank, 1);
    EXPECT_EQ(got[i].t, double(i + 1)) << "sample " << i;  // oldest first, none lost or repeated
  }
  std::vector<ResourceSample> rest = sampler.take();
  for (auto& x : rest) EXPECT_GT(x.t, got.back().t);  // what came later, not what was taken
}

TEST(ResourceSampler, TakesOneSampleAtOnceAndNoneBeforeTheInterval) {
  ResourceSampler sampler(3600, 0, [] { return 1.0; });
  EXPECT_EQ(wait_for_samples(sampler, 1).size(), 1u);
  EXPECT_TRUE(sampler.take().empty());  // drained; the next is an hour away
}

TEST(ResourceSampler, StopsPromptlyDuringALongInterval) {
  auto sampler = std::make_unique<ResourceSampler>(3600, 0, [] { return 0.0; });
  ASSERT_EQ(wait_for_samples(*sampler, 1).size(), 1u);  // the thread is waiting for the next hour
  const auto t0 = SteadyClock::now();
  sampler.reset();
  EXPECT_LT(seconds_since(t0), 2.0);
}

TEST(ResourceSampler, GpuProbeFillsTheGpuFigures) {
  ResourceSampler sampler(
      3600, 0, [] { return 0.0; },
      [] {
        return std::optional<DeviceUsage>(DeviceUsage{97, 20480});
      });
  const ResourceSample s = sampler.sample_now();
  ASSERT_TRUE(s.gpu_util_percent.has_value() && s.gpu_mem_mb.has_value());
  EXPECT_EQ(*s.gpu_util_percent, 97.0);
  EXPECT_EQ(*s.gpu_mem_mb, 20480.0);
  ResourceSampler none(
      3600, 0, [] { return 0.0; }, [] { return std::optional<DeviceUsage>(); });
  EXPECT_FALSE(none.sample_now().gpu_util_percent.has_value());
}

TEST(ResourceSampler, AClockThatThrowsReachesTake) {
  ResourceSampler sampler(3600, 0, []() -> double { throw Error("clock broke"); });
  const auto t0 = SteadyClock::now();
  std::string error;
  while (error.empty() && seconds_since(t0) < 60) {
    error = error_of([&] { sampler.take(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(error, "clock broke");
}

TEST(ResourceSampler, RefusesAnIntervalThatIsNotPositive) {
  EXPECT_NE(error_of([] { ResourceSampler(0, 0, [] { return 0.0; }); }).find("train.sample_every_s"),
            std::string::npos);
  EXPECT_NE(error_of([] { ResourceSampler(-1, 0, [] { return 0.0; }); }), "");
}

TEST(ResourceGather, BringsEveryRanksSamplesWithTheirRanks) {
  constexpr int P = 3;
  auto rs = run_ranks(P, [](int r, int port) {
    World w(env_for(r, P, port, "test-token"), Millis(20000));
    // Rank 0 has 2 samples, rank 1 none, rank 2 three; rank 2's lack I/O figures, rank 0's have a GPU.
    const int counts[P] = {2, 0, 3};
    std::vector<ResourceSample> mine;
    for (int i = 0; i < counts[r]; ++i) {
      ResourceSample s = sample(r, 10.0 * r + i + 0.25, 100 * r + i, 50.0 + r, 300.5 + i);
      if (r != 2) {
        s.read_mb = 1.5 * i;
        s.write_mb = 2.0;
      }
      if (r == 0) {
        s.gpu_util_percent = 97;
        s.gpu_mem_mb = 1024.0 + i;
      }
      mine.push_back(s);
    }
    const auto all = gather_resource_samples(w.all(), mine);
    RANK_CHECK(all.size() == 5, "5 samples, got " + std::to_string(all.size()));
    const int want_rank[5] = {0, 0, 2, 2, 2}, want_i[5] = {0, 1, 0, 1, 2};
    for (size_t k = 0; k < all.size(); ++k) {
      const ResourceSample& s = all[k];
      const int q = want_rank[k], i = want_i[k];
      const std::string at = "sample " + std::to_string(k);
      RANK_CHECK(s.rank == q, at);
      RANK_CHECK(s.t == 10.0 * q + i + 0.25 && s.step == 100 * q + i, at);
      RANK_CHECK(s.cpu_percent == 50.0 + q && s.rss_mb == 300.5 + i && s.threads == 4 + q, at);
      RANK_CHECK(s.read_mb.has_value() == (q != 2) && s.write_mb.has_value() == (q != 2), at + ": I/O present?");
      if (q == 0) RANK_CHECK(s.read_mb == 1.5 * i && s.write_mb == 2.0, at);
      RANK_CHECK(s.gpu_util_percent.has_value() == (q == 0) && s.gpu_mem_mb.has_value() == (q == 0),
                 at + ": GPU present?");
      if (q == 0) RANK_CHECK(s.gpu_util_percent == 97.0 && s.gpu_mem_mb == 1024.0 + i, at);
    }
    RANK_CHECK(gather_resource_samples(w.all(), {}).empty(), "no samples anywhere");
    const auto hosts = w.hosts();
    RANK_CHECK(hosts.size() == size_t(P), "a host per rank");
    for (const auto& h : hosts) RANK_CHECK(h == host_name().substr(0, 63), "host " + h);
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "");
}

TEST(ResourceJson, RecordHasTheDocumentedFieldsAndLeavesOutAbsentOnes) {
  ResourceSample s = sample(1, 12.0234, 40, 99.12, 310.54);
  s.threads = 5;
  s.read_mb = 1.2;
  s.write_mb = 30.4;
  EXPECT_EQ(to_json(s, "node07").dump(),
            R"({"type":"resource","rank":1,"host":"node07","step":40,"t":12.023,"cpu_percent":99.1,"rss_mb":310.5,)"
            R"("threads":5,"read_mb":1.2,"write_mb":30.4})");
  s.gpu_util_percent = 97;
  s.gpu_mem_mb = 20480;
  s.read_mb.reset();
  s.write_mb.reset();
  EXPECT_EQ(to_json(s, "node07").dump(),
            R"({"type":"resource","rank":1,"host":"node07","step":40,"t":12.023,"cpu_percent":99.1,"rss_mb":310.5,)"
            R"("threads":5,"gpu_util_percent":97.0,"gpu_mem_mb":20480.0})");
}

TEST(ResourceJson, MaxPicksTheRankOfEachFiguresLargestValue) {
  ResourceMax m;
  EXPECT_EQ(to_json(m).dump(), R"({"samples":0,"max":{}})");
  ResourceSample a = sample(0, 1, 1, 199.0, 100.0);  // rank 0: most CPU
  ResourceSample b = sample(1, 1, 1, 90.0, 400.0);   // rank 1: most memory
  ResourceSample c = sample(2, 2, 2, 199.0, 50.0);   // rank 2: ties rank 0's CPU later; most threads (6)
  b.write_mb = 30.0;
  c.write_mb = 12.5;
  for (const auto& s : {a, b, c}) m.add(s);
  EXPECT_EQ(m.samples(), 3);
  EXPECT_EQ(m.peak("cpu_percent")->rank, 0);  // the first to reach it
  EXPECT_EQ(m.peak("cpu_percent")->value, 199.0);
  EXPECT_EQ(m.peak("rss_mb")->rank, 1);
  EXPECT_EQ(m.peak("threads")->rank, 2);
  EXPECT_EQ(m.peak("write_mb")->rank, 1);
  EXPECT_FALSE(m.peak("read_mb").has_value());
  EXPECT_FALSE(m.peak("gpu_mem_mb").has_value());
  EXPECT_EQ(to_json(m).dump(),
            R"({"samples":3,"max":{"cpu_percent":{"value":199.0,"rank":0},"rss_mb":{"value":400.0,"rank":1},)"
            R"("threads":{"value":6,"rank":2},"write_mb":{"value":30.0,"rank":1}}})");
}
