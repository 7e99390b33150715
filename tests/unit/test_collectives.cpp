// Collectives over the Gloo process group on 1–4 local ranks: results against what each
// operation must produce, uneven sizes, sub-groups, async ordering, and failures that name the
// operation, the group and the missing ranks instead of hanging.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <thread>

#include "comm/clock_offsets.hpp"
#include "collective_checks.hpp"
#include "comm_test_util.hpp"
#include "core/error.hpp"
#include "core/trace.hpp"

using namespace dtrain;
using dist_test::check_all_to_all;
using dist_test::check_all_to_all_v;
using dist_test::check_allreduce;
using dist_test::check_bf16;
using dist_test::check_gather_scatter;
using dist_test::env_for;
using dist_test::failures;
using dist_test::run_ranks;

namespace {

constexpr Millis kTimeout(20000);

// The silence reported for `rank` in a failure message ("rank 2 stopped (no heartbeat for
// [at least ]9.5 s: ..."), -1 when the message does not report it stopped.
double reported_silence(const std::string& e, int rank) {
  const std::string key = "rank " + std::to_string(rank) + " stopped (no heartbeat for ";
  size_t p = e.find(key);
  if (p == std::string::npos) return -1;
  p += key.size();
  if (e.compare(p, 9, "at least ") == 0) p += 9;
  return std::atof(e.c_str() + p);
}

}  // namespace

TEST(Collectives, AllreduceEveryOpAndSizeOnOneToFourRanks) {
  for (int P = 1; P <= 4; ++P) {
    auto rs = run_ranks(P, [P](int r, int port) {
      World w(env_for(r, P, port, "test-token"), kTimeout);
      for (size_t n : {size_t(1), size_t(7), size_t(4096), size_t(1000003)}) check_allreduce(w.all(), n);
      if (P == 2) check_bf16(w.all());
      w.shutdown();
    });
    EXPECT_EQ(failures(rs), "") << "world size " << P;
  }
}

TEST(Collectives, GatherScatterBroadcastSendRecvOnOneToFourRanks) {
  for (int P = 1; P <= 4; ++P) {
    auto rs = run_ranks(P, [P](int r, int port) {
      World w(env_for(r, P, port, "test-token"), kTimeout);
      check_gather_scatter(w.all());
      w.shutdown();
    });
    EXPECT_EQ(failures(rs), "") << "world size " << P;
  }
}

TEST(Collectives, AllToAllOnOneToFourRanks) {
  for (int P = 1; P <= 4; ++P) {
    auto rs = run_ranks(P, [P](int r, int port) {
      World w(env_for(r, P, port, "test-token"), kTimeout);
      check_all_to_all(w.all());
      check_all_to_all_v(w.all());
      w.shutdown();
    });
    EXPECT_EQ(failures(rs), "") << "world size " << P;
  }
}

// An all_to_all is numbered, described and traced like the other collectives (its bytes: this
// rank's whole input), and refuses overlapping buffers when issued.
TEST(Collectives, AllToAllIsDescribedTracedAndRefusesOverlap) {
  auto rs = run_ranks(2, [](int r, int port) {
    World w(env_for(r, 2, port, "test-token"), kTimeout);
    std::vector<float> in(2 * 300, float(r)), out(in.size());
    bool refused = false;
    try {
      w.all().all_to_all_async(in.data(), in.data() + 1, 300, ElemType::f32);
    } catch (const Error& e) {
      refused = std::string(e.what()).find("all_to_all needs input and output buffers apart") != std::string::npos;
    }
    RANK_CHECK(refused, "overlapping buffers refused");
    float x = 1;
    w.all().allreduce(&x, 1);
    Trace::take();
    Trace::set_on(true);
    auto work = w.all().all_to_all_async(in.data(), out.data(), 300, ElemType::f32);
    work->wait();
    Trace::set_on(false);
    const std::vector<TraceSpan> spans = Trace::take();
    RANK_CHECK(work->describe() == "all_to_all of 2.3 KiB (operation #2 of process group 'world', 2 ranks)",
               work->describe());
    RANK_CHECK(spans.size() == 1 && spans[0].track == "comm world" && spans[0].name == "all_to_all", "one span");
    RANK_CHECK(spans[0].args.find("\"bytes\":2400") != std::string::npos, spans[0].args);
    for (size_t i = 0; i < out.size(); ++i) RANK_CHECK(out[i] == float(i / 300), "all_to_all result");
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "");
}

// An all_to_all_v is described and traced like the others (its bytes: what this rank sends), and
// refuses when issued counts that are not one per rank, its own block's two counts disagreeing,
// and overlapping buffers.
TEST(Collectives, AllToAllVIsDescribedTracedAndRefusesBadArguments) {
  auto rs = run_ranks(2, [](int r, int port) {
    World w(env_for(r, 2, port, "test-token"), kTimeout);
    ProcessGroup& g = w.all();
    const size_t mine = 100 * size_t(r + 1);  // rank r sends each rank 100 (r + 1) floats
    const std::vector<size_t> sends(2, mine), recvs{100, 200};
    std::vector<float> in(2 * mine, float(r)), out(300, -1.0f);
    auto refused = [](const std::function<void()>& issue, const std::string& why) {
      try {
        issue();
      } catch (const Error& e) {
        return std::string(e.what()).find(why) != std::string::npos;
      }
      return false;
    };
    RANK_CHECK(refused([&] { g.all_to_all_v_async(in.data(), {mine}, out.data(), recvs, ElemType::f32); },
                       "all_to_all_v needs one send and one receive count per rank of the group (2), not 1 and 2"),
               "one count short refused");
    std::vector<size_t> disagree = recvs;
    disagree[size_t(r)] += 1;
    RANK_CHECK(refused([&] { g.all_to_all_v_async(in.data(), sends, out.data(), disagree, ElemType::f32); },
                       "its own block's two counts must agree"),
               "own block's counts disagreeing refused");
    RANK_CHECK(refused([&] { g.all_to_all_v_async(in.data(), sends, in.data() + 1, recvs, ElemType::f32); },
                       "all_to_all_v needs input and output buffers apart"),
               "overlapping buffers refused");
    float x = 1;
    g.allreduce(&x, 1);
    Trace::take();
    Trace::set_on(true);
    auto work = g.all_to_all_v_async(in.data(), sends, out.data(), recvs, ElemType::f32);
    work->wait();
    Trace::set_on(false);
    const std::vector<TraceSpan> spans = Trace::take();
    const std::string size = r == 0 ? "800 B" : "1.6 KiB";
    RANK_CHECK(work->describe() == "all_to_all_v of " + size + " (operation #2 of process group 'world', 2 ranks)",
               work->describe());
    RANK_CHECK(spans.size() == 1 && spans[0].track == "comm world" && spans[0].name == "all_to_all_v", "one span");
    RANK_CHECK(spans[0].args.find("\"bytes\":" + std::to_string(mine * 2 * 4)) != std::string::npos, spans[0].args);
    for (size_t i = 0; i < out.size(); ++i) RANK_CHECK(out[i] == float(i >= 100), "all_to_all_v result");
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "");
}

TEST(Collectives, AsyncOperationsCompleteInIssueOrder) {
  auto rs = run_ranks(3, [](int r, int port) {
    World w(env_for(r, 3, port, "test-token"), kTimeout);
    std::vector<std::vector<float>> bufs(8, std::vector<float>(50000));
    std::vector<WorkPtr> works;
    for (size_t k = 0; k < bufs.size(); ++k) {
      std::fill(bufs[k].begin(), bufs[k].end(), float(k + 1));
      works.push_back(w.all().allreduce_async(bufs[k].data(), bufs[k].size(), ElemType::f32, ReduceOp::sum));
    }
    for (size_t k = works.size(); k-- > 0;) works[k]->wait();  // waited out of order
    for (size_t k = 0; k < bufs.size(); ++k)
      for (float v : bufs[k]) RANK_CHECK(v == 3.0f * float(k + 1), "async result " + std::to_string(k));
    RANK_CHECK(works[0]->done() && works[0]->seconds() >= 0.0, "done");
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "");
}

TEST(Collectives, SubGroupsReduceOnlyAmongTheirMembers) {
  auto rs = run_ranks(4, [](int r, int port) {
    World w(env_for(r, 4, port, "test-token"), kTimeout);
    auto even = w.new_group({0, 2}, "even");
    auto odd = w.new_group({1, 3}, "odd");
    auto back = w.new_group({3, 2, 1}, "back");  // order defines group ranks
    RANK_CHECK((even != nullptr) == (r % 2 == 0) && (odd != nullptr) == (r % 2 == 1), "membership");
    auto& mine = r % 2 == 0 ? *even : *odd;
    RANK_CHECK(mine.size() == 2 && mine.rank() == r / 2, "group rank");
    float x = float(r);
    mine.allreduce(&x, 1);
    RANK_CHECK(x == (r % 2 == 0 ? 2.0f : 4.0f), "sub-group sum");
    check_all_to_all(mine);
    check_all_to_all_v(mine);
    if (back) {
      RANK_CHECK(back->rank() == 3 - r, "reordered group rank");
      int32_t v = r == 3 ? 99 : 0;
      back->broadcast(&v, 1, ElemType::i32, 0);  // group rank 0 = global rank 3
      RANK_CHECK(v == 99, "broadcast in reordered group");
      check_all_to_all(*back);
      check_all_to_all_v(*back);
      // blocks go by group rank: block j of the output came from global rank 3 - j
      std::vector<int32_t> sent(3, r), got(3, -1);
      back->all_to_all(sent.data(), got.data(), 1, ElemType::i32);
      for (int j = 0; j < 3; ++j) RANK_CHECK(got[size_t(j)] == 3 - j, "all_to_all in reordered group");
    } else {
      RANK_CHECK(r == 0, "only rank 0 is outside 'back'");
    }
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "");
}

TEST(Collectives, ARankThatNeverJoinsIsNamedAfterTheTimeout) {
  const auto t0 = std::chrono::steady_clock::now();
  auto rs = run_ranks(3, [](int r, int port) {
    if (r == 2) return;  // never joins
    World w(env_for(r, 3, port, "test-token"), Millis(2000));
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 30.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(rs[size_t(r)].exit_code, 1);
    EXPECT_NE(rs[size_t(r)].error.find("process group 'world'"), std::string::npos) << rs[size_t(r)].error;
    EXPECT_NE(rs[size_t(r)].error.find("rank(s) 2 did not join"), std::string::npos) << rs[size_t(r)].error;
  }
}

TEST(Collectives, ARankThatSkipsAnOperationIsNamedByTheOthers) {
  auto rs = run_ranks(3, [](int r, int port) {
    World w(env_for(r, 3, port, "test-token"), Millis(2000));
    float x = 1;
    w.all().allreduce(&x, 1);
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(8));  // alive, but never reaches operation #2
      return;
    }
    w.all().allreduce(&x, 1);
  });
  EXPECT_EQ(rs[1].exit_code, 0);
  for (int r : {0, 2}) {
    const std::string& e = rs[size_t(r)].error;
    EXPECT_EQ(rs[size_t(r)].exit_code, 1);
    EXPECT_NE(e.find("allreduce sum of 4 B (operation #2 of process group 'world', 3 ranks) failed"),
              std::string::npos) << e;
    EXPECT_NE(e.find("rank 1 has not reached it"), std::string::npos) << e;
  }
}

TEST(Collectives, ARankThatDiesIsNamedByTheOthers) {
  auto rs = run_ranks(3, [](int r, int port) {
    World w(env_for(r, 3, port, "test-token"), Millis(5000));
    std::vector<float> x(1 << 16, 1.0f);
    w.all().allreduce(x.data(), x.size());
    if (r == 2) _exit(3);  // dies between operations, without a word
    w.all().allreduce(x.data(), x.size());
  });
  EXPECT_EQ(rs[2].exit_code, 3);
  for (int r : {0, 1}) {
    const std::string& e = rs[size_t(r)].error;
    EXPECT_EQ(rs[size_t(r)].exit_code, 1);
    EXPECT_NE(e.find("operation #2 of process group 'world'"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 2 stopped"), std::string::npos) << e;
  }
}

TEST(Collectives, AFrozenRankIsReportedWithHowLongItHasBeenSilent) {
  constexpr Millis kOpTimeout(6000);
  auto rs = run_ranks(3, [&](int r, int port) {
    World w(env_for(r, 3, port, "test-token"), kOpTimeout);
    float x = 1;
    w.all().allreduce(&x, 1);
    if (r == 2) {
      w.store()->set("test/frozen-pid", std::to_string(getpid()));
      raise(SIGSTOP);  // frozen, heartbeat thread too, until rank 0 kills it
      return;
    }
    // Rank 0 ends the frozen rank once its own operation has failed (or, unexpectedly, not).
    struct EndFrozen {
      World& w;
      ~EndFrozen() {
        try {
          if (w.rank() == 0) kill(pid_t(std::stol(w.store()->get("test/frozen-pid", Millis(30000)))), SIGKILL);
        } catch (const std::exception&) {
        }
      }
    } end_frozen{w};
    w.all().allreduce(&x, 1);  // rank 2 never comes: fails after the timeout
  });
  EXPECT_EQ(rs[2].exit_code, 128 + SIGKILL);
  for (int r : {0, 1}) {
    const std::string& e = rs[size_t(r)].error;
    EXPECT_EQ(rs[size_t(r)].exit_code, 1);
    EXPECT_NE(e.find("operation #2 of process group 'world'"), std::string::npos) << e;
    // Frozen for the whole timeout (6 s) and the diagnosis after it: a few beats of watching
    // less than that, never the diagnosis's own 3.5 s window alone.
    EXPECT_GE(reported_silence(e, 2), 5.0) << e;
  }
}

// Ranks on one host share CLOCK_MONOTONIC, so the measured offsets are zero within their stated
// error; a collective records a span on its group's track (with its bytes) while tracing, and the
// training thread's wait for it is charged to the comm phase.
TEST(Collectives, ClockOffsetsSpansAndTheCommPhase) {
  auto rs = run_ranks(3, [](int r, int port) {
    World w(env_for(r, 3, port, "test-token"), kTimeout);
    const ClockOffsets c = measure_clock_offsets(w.all());
    RANK_CHECK(c.offset_s.size() == 3 && c.offset_s[0] == 0.0, "rank 0's offset is 0");
    for (int k = 1; k < 3; ++k) {
      RANK_CHECK(c.error_s[size_t(k)] > 0 && c.error_s[size_t(k)] < 0.05, "round trips on loopback are short");
      RANK_CHECK(std::abs(c.offset_s[size_t(k)]) <= c.error_s[size_t(k)] + 1e-4,
                 "offset " + std::to_string(c.offset_s[size_t(k)]) + " beyond its error " + std::to_string(c.error_s[size_t(k)]));
    }
    PhaseClock clock;
    clock.end_step();
    Trace::take();
    Trace::set_on(true);
    std::vector<float> v(1000, 1.0f);
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the others wait for rank 0
    w.all().allreduce_async(v.data(), v.size(), ElemType::f32, ReduceOp::sum)->wait();
    Trace::set_on(false);
    const PhaseSeconds p = clock.end_step();
    const std::vector<TraceSpan> spans = Trace::take();
    std::string seen;
    for (const TraceSpan& sp : spans) seen += " [" + sp.track + ": " + sp.name + "]";
    RANK_CHECK(spans.size() == 1 && spans[0].track == "comm world" && spans[0].name == "allreduce sum",
               "one span on the group's track, saw" + seen);
    RANK_CHECK(spans[0].args.find("\"bytes\":4000") != std::string::npos, spans[0].args);
    if (r != 0) RANK_CHECK(p[size_t(Phase::comm)] > 0.02, "the wait for rank 0 is comm: " + std::to_string(p[size_t(Phase::comm)]));
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "");
}
