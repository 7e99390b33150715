// The MPI backend (parallel.backend = mpi) under mpirun: every collective and point-to-point
// operation of the process-group API against what it must produce (the checks the Gloo tests run,
// bf16 bit for bit as Gloo rounds), sub-groups with communicators of their own, operations from
// several threads at once, world ranks that are MPI_COMM_WORLD's; a stuck rank ends the job within
// the timeout naming it, a dead one ends it at once. Each test starts itself as N ranks under
// `mpirun` and checks how that ended; skipped when mpirun or the MPI plugin is missing.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "collective_checks.hpp"
#include "comm/env.hpp"
#include "comm/mpi_plugin.hpp"
#include "comm/world.hpp"

using namespace dtrain;
using dist_test::check_all_to_all;
using dist_test::check_all_to_all_v;
using dist_test::check_allreduce;
using dist_test::check_bf16;
using dist_test::check_gather_scatter;

namespace {

constexpr Millis kTimeout(30000);

bool under_mpirun() { return std::getenv("DTRAIN_TEST_UNDER_MPIRUN") && std::getenv("OMPI_COMM_WORLD_SIZE"); }

// Why this machine cannot run the tests ("" when it can).
std::string why_not_here() {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) return "mpirun is not installed (openmpi-bin)";
  if (const std::string p = mpi_backend_path(); p.empty() || !std::filesystem::exists(p))
    return "this build has no MPI backend (no libdtrain_mpi.so): install libopenmpi-dev and build again";
  return "";
}

int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    std::abort();
  ::close(s);
  return ntohs(a.sin_port);
}

struct Launched {
  int rc = -1;
  std::string output;
  double seconds = 0;
};

// This test again, as `np` ranks under mpirun (one thread each, a store port of their own).
Launched launch_as_ranks(int np) {
  const auto* t = testing::UnitTest::GetInstance()->current_test_info();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(np) +
                          " -x OMP_NUM_THREADS=1 -x DTRAIN_TEST_UNDER_MPIRUN=1 -x MASTER_PORT=" +
                          std::to_string(free_port()) + " " + self + " --gtest_filter=" + t->test_suite_name() + "." +
                          t->name() + " 2>&1";
  Launched l;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return l;
  char buf[4096];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, p)) > 0) l.output.append(buf, k);
  const int status = ::pclose(p);
  l.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  l.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return l;
}

}  // namespace

// In the test process: runs the test as `np` ranks under mpirun into `launched` and goes on with the
// checks after `launched_checks`; in a rank, falls through to the test's body.
#define AS_MPI_RANKS(np, launched)                       \
  Launched launched;                                     \
  if (!under_mpirun()) {                                 \
    if (const std::string why = why_not_here(); !why.empty()) GTEST_SKIP() << why; \
    launched = launch_as_ranks(np);                      \
  }                                                      \
  if (!under_mpirun())

#define EXPECT_RANKS_PASS(np)                                                              \
  AS_MPI_RANKS(np, launched_) {                                                            \
    EXPECT_EQ(launched_.rc, 0) << launched_.output;                                        \
    return;                                                                                \
  }

TEST(Mpi, EveryCollectiveAndSendRecvOnThreeRanks) {
  EXPECT_RANKS_PASS(3);
  const DistEnv env = detect_env();
  World w(env, kTimeout, CommBackend::mpi);
  EXPECT_EQ(w.rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  EXPECT_EQ(w.size(), 3);
  EXPECT_EQ(w.describe_backend().rfind("MPI (", 0), 0u) << w.describe_backend();
  for (size_t n : {size_t(1), size_t(7), size_t(4096), size_t(1000003)}) check_allreduce(w.all(), n);
  check_gather_scatter(w.all());
  check_all_to_all(w.all());
  check_all_to_all_v(w.all());
  // in-place allgather: this rank's share already in its slot
  std::vector<float> slots(3 * 100, -1.0f);
  for (int i = 0; i < 100; ++i) slots[size_t(w.rank() * 100 + i)] = float(w.rank() * 1000 + i);
  w.all().allgather(slots.data() + w.rank() * 100, slots.data(), 100, ElemType::f32);
  for (int q = 0; q < 3; ++q)
    for (int i = 0; i < 100; ++i) EXPECT_EQ(slots[size_t(q * 100 + i)], float(q * 1000 + i));
  w.shutdown();
}

TEST(Mpi, Bf16AndEveryElementTypeReduceAsGlooDoes) {
  EXPECT_RANKS_PASS(2);
  World w(detect_env(), kTimeout, CommBackend::mpi);
  check_bf16(w.all());
  check_all_to_all(w.all());
  check_all_to_all_v(w.all());
  w.shutdown();
}

// Messages are told apart by tag (received in another order than sent), large ones and empty ones
// arrive whole.
TEST(Mpi, SendRecvMatchByTagWhateverTheSize) {
  EXPECT_RANKS_PASS(2);
  World w(detect_env(), kTimeout, CommBackend::mpi);
  const int peer = 1 - w.rank();
  std::vector<uint8_t> big(5 << 20), got(5 << 20, 0);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 7 + size_t(w.rank()));
  char none = 0;
  auto s1 = w.all().send_async(big.data(), big.size(), peer, 1);
  auto s2 = w.all().send_async(&none, 0, peer, 2);
  int32_t small = 40 + w.rank(), their = -1;
  auto s3 = w.all().send_async(&small, sizeof small, peer, 3);
  auto r3 = w.all().recv_async(&their, sizeof their, peer, 3);  // posted first, sent last
  auto r2 = w.all().recv_async(&none, 0, peer, 2);
  auto r1 = w.all().recv_async(got.data(), got.size(), peer, 1);
  for (const auto& x : {r3, r2, r1, s1, s2, s3}) x->wait();
  EXPECT_EQ(their, 40 + peer);
  for (size_t i = 0; i < got.size(); i += 4099) ASSERT_EQ(got[i], uint8_t(i * 7 + size_t(peer))) << i;
  w.shutdown();
}

TEST(Mpi, SubGroupsHaveCommunicatorsOfTheirOwn) {
  EXPECT_RANKS_PASS(4);
  World w(detect_env(), kTimeout, CommBackend::mpi);
  const int r = w.rank();
  auto even = w.new_group({0, 2}, "even");
  auto odd = w.new_group({1, 3}, "odd");
  auto back = w.new_group({3, 2, 1}, "back");  // the order gives the group ranks
  ASSERT_EQ(even != nullptr, r % 2 == 0);
  ASSERT_EQ(odd != nullptr, r % 2 == 1);
  ProcessGroup& mine = r % 2 == 0 ? *even : *odd;
  EXPECT_EQ(mine.rank(), r / 2);
  float x = float(r);
  mine.allreduce(&x, 1);
  EXPECT_EQ(x, r % 2 == 0 ? 2.0f : 4.0f);
  check_allreduce(mine, 4099);
  check_all_to_all(mine);
  check_all_to_all_v(mine);
  if (back) {
    EXPECT_EQ(back->rank(), 3 - r);
    int32_t v = r == 3 ? 99 : 0;
    back->broadcast(&v, 1, ElemType::i32, 0);  // group rank 0 = world rank 3
    EXPECT_EQ(v, 99);
    check_gather_scatter(*back);
    check_all_to_all(*back);
    check_all_to_all_v(*back);
  } else {
    EXPECT_EQ(r, 0);
  }
  w.shutdown();
}

// Three communicators busy at once: two groups' threads run queued allreduces while this thread runs
// blocking ones and a send/recv exchange on the world (MPI_THREAD_MULTIPLE).
TEST(Mpi, OperationsOnSeveralThreadsAtOnce) {
  EXPECT_RANKS_PASS(2);
  World w(detect_env(), kTimeout, CommBackend::mpi);
  auto a = w.new_group({0, 1}, "a");
  auto b = w.new_group({1, 0}, "b");
  std::vector<std::vector<float>> bufs(16, std::vector<float>(100000));
  std::vector<WorkPtr> works;
  for (size_t k = 0; k < bufs.size(); ++k) {
    std::fill(bufs[k].begin(), bufs[k].end(), float(k + 1));
    ProcessGroup& g = k % 2 ? *b : *a;
    works.push_back(g.allreduce_async(bufs[k].data(), bufs[k].size(), ElemType::f32, ReduceOp::sum));
  }
  const int peer = 1 - w.rank();
  for (int i = 0; i < 50; ++i) {
    double v = i + w.rank();
    w.all().allreduce(&v, 1);
    ASSERT_EQ(v, 2.0 * i + 1);
    int64_t mine = i * 10 + w.rank(), theirs = -1;
    auto s = w.all().send_async(&mine, sizeof mine, peer, uint32_t(i));
    w.all().recv_async(&theirs, sizeof theirs, peer, uint32_t(i))->wait();
    s->wait();
    ASSERT_EQ(theirs, i * 10 + peer);
  }
  for (size_t k = works.size(); k-- > 0;) works[k]->wait();
  for (size_t k = 0; k < bufs.size(); ++k)
    for (float v : bufs[k]) ASSERT_EQ(v, 2.0f * float(k + 1)) << k;
  w.shutdown();
}

// MPI cannot cancel an operation: when rank 1 (alive) never reaches operation #2, the watchdog of the
// others ends the job after the 3 s timeout with the diagnosis, long before rank 1 would come.
TEST(Mpi, AStuckRankEndsTheJobWithinTheTimeoutNamingIt) {
  AS_MPI_RANKS(3, launched) {
    EXPECT_NE(launched.rc, 0) << launched.output;
    EXPECT_LT(launched.seconds, 25.0) << launched.output;
    EXPECT_NE(launched.output.find("dtrain: error: allreduce sum of 4 B (operation #2 of process group 'world', 3 "
                                   "ranks) did not finish within 3 s (parallel.timeout_s); missing: rank 1 has not "
                                   "reached it"),
              std::string::npos)
        << launched.output;
    EXPECT_NE(launched.output.find("MPI_Abort"), std::string::npos) << launched.output;
    return;
  }
  World w(detect_env(), Millis(3000), CommBackend::mpi);
  float x = 1;
  w.all().allreduce(&x, 1);
  if (w.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(40));
    return;
  }
  w.all().allreduce(&x, 1);
  ADD_FAILURE() << "operation #2 finished without rank 1";
}

// A rank that dies: mpirun ends the others at once (not after the 60 s timeout).
TEST(Mpi, ADeadRankEndsTheJobAtOnce) {
  AS_MPI_RANKS(2, launched) {
    EXPECT_NE(launched.rc, 0) << launched.output;
    EXPECT_LT(launched.seconds, 40.0) << launched.output;
    return;
  }
  World w(detect_env(), Millis(60000), CommBackend::mpi);
  std::vector<float> x(1 << 16, 1.0f);
  w.all().allreduce(x.data(), x.size());
  if (w.rank() == 1) _exit(3);
  w.all().allreduce(x.data(), x.size());
  ADD_FAILURE() << "operation #2 finished without rank 1";
}
