// measure_node_link (see calibrate_link.hpp): all-reduces between local processes over Gloo, beside a
// computation and alone, and what they take of it.
#include "train/plan/calibrate_link.hpp"

#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "comm/world.hpp"
#include "core/error.hpp"
#include "kernels/device.hpp"
#include "train/plan/step_clock.hpp"

namespace dtrain {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSizes = 13;  // all-reduce sizes measured: 4 B × 4^i

// The computation the link's measurements put between and beside their collectives: products of
// 512³ (a few milliseconds for two, as tensor parallel's come between its matmuls).
class Products {
 public:
  void large(int count) {
    for (int k = 0; k < count; ++k) cpu_device().matmul(a_.data(), a_.data(), c_.data(), large_);
  }

 private:
  std::vector<float> a_ = std::vector<float>(size_t(512 * 512), 0.5f), c_ = a_;
  MatmulArgs large_{512, 512, 512, false, false, false, nullptr, Precision::f32};
};

// How many times each size is measured: a small all-reduce's time on a virtual machine is bimodal
// (a fraction of a millisecond, or several) and the mix drifts over seconds, so the sizes take their
// turns round by round (a drift moves the whole curve, not its shape) and the small ones, cheap,
// many times; the sizes above 4 MiB take tens of milliseconds and vary less.
int reps_of(int size) { return size > 10 ? 9 : 121; }

// measure(i, reps) for the sizes round by round, size i reps_of(i) / share times in all (`reps`).
template <class Measure>
void by_rounds(int share, Measure&& measure) {
  for (int rep = 0; rep < reps_of(0) / share; ++rep)
    for (int i = 0; i < kSizes && rep < reps_of(i) / share; ++i) measure(i, reps_of(i) / share);
}

// All-reduces by size as a job waits for one between its computations: each issued right after two
// products of 512³ (a few milliseconds, as tensor parallel's come between its matmuls) and waited for
// at once, with no barrier, as in a job: its time is from this rank's arrival to its end, waiting
// for the other rank included (a rank leaves a collective when its last bytes come, and the one that
// left first waits at the next), averaged over the pair. Between computations the ranks' threads
// sleep while the bytes move, and waking them is what a small all-reduce costs: on this VM about as
// much as a megabyte's, several times the same all-reduce's time in a tight loop.
// out[i]: the mean seconds at 4 B × 4^i.
void measure_alone(ProcessGroup& pair, std::vector<float>& buf, double* out) {
  Products products;
  std::fill(out, out + kSizes, 0.0);
  by_rounds(1, [&](int i, int reps) {
    products.large(2);
    const auto t0 = Clock::now();
    pair.allreduce_async(buf.data(), size_t(1) << (2 * i), ElemType::f32, ReduceOp::sum)->wait();
    out[i] += std::chrono::duration<double>(Clock::now() - t0).count() / reps;
  });
  pair.allreduce(out, kSizes, ReduceOp::avg);
}

// All-reduces by size beside a computation, as a job overlaps one (DDP's buckets, FSDP's prefetched
// gathers, tensor parallel's input gradient beside its weight gradient): issued after two products of
// 512³ as in measure_alone, then this rank computes on, products of 512³ as a job's (their operands
// in the caches the collective's copies and sums use too), until it is done. out[i]: its mean seconds
// at 4 B × 4^i on the communication thread, averaged over the pair; steal[i]: the seconds of
// computation lost meanwhile (Hardware::allreduce_steal_seconds: the communication threads' work on
// the same cores, waking them included), the products' time beside it less their time alone.
void measure_beside(ProcessGroup& pair, std::vector<float>& buf, double* out, double* steal) {
  Products products;
  std::vector<double> one(15);  // one product's seconds with no collective beside it: the median
  for (double& t : one) {
    const auto t0 = Clock::now();
    products.large(1);
    t = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  std::nth_element(one.begin(), one.begin() + 7, one.end());
  const double alone = one[7];
  std::fill(out, out + kSizes, 0.0);
  std::fill(steal, steal + kSizes, 0.0);
  by_rounds(2, [&](int i, int reps) {
    products.large(2);
    const auto t0 = Clock::now();
    WorkPtr w = pair.allreduce_async(buf.data(), size_t(1) << (2 * i), ElemType::f32, ReduceOp::sum);
    int done = 0;
    for (; !w->done(); ++done) products.large(1);
    w->wait();
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    out[i] += w->seconds() / reps;
    steal[i] += (t - done * alone) / reps;
  });
  pair.allreduce(out, kSizes, ReduceOp::avg);
  pair.allreduce(steal, kSizes, ReduceOp::avg);
  for (int i = 0; i < kSizes; ++i) steal[i] = std::max(0.0, steal[i]);
}

// How unevenly the node's ranks compute (Hardware::jitter): every rank computes the same products
// between barriers, and the slowest finishes behind each rank by the lag; at a short span (2 products
// of 512³, a few milliseconds: tensor parallel's between collectives) and a long one (16). out[0]:
// jitter, the short span's mean lag over E[max of P normals] × the span (as the planner's StepClock
// takes it back); out[1]: the short span's seconds; out[2]: the growth, lag ∝ span^growth (1 when the
// ranks' speeds differ for good; below when the system's time slices even them out).
void measure_spread(World& world, double* out) {
  Products products;
  const int P = world.all().size();
  auto mean_lag = [&](int count, int reps, double* span) {
    std::vector<double> mine(static_cast<size_t>(reps)), all(size_t(P) * mine.size());
    for (int rep = 0; rep < reps; ++rep) {
      world.all().barrier();
      const auto t0 = Clock::now();
      products.large(count);
      mine[size_t(rep)] = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    world.all().allgather(mine.data(), all.data(), mine.size(), ElemType::f64);
    double lag = 0.0, sum = 0.0;
    for (int rep = 0; rep < reps; ++rep) {
      double slowest = 0.0;
      for (int r = 0; r < P; ++r) slowest = std::max(slowest, all[size_t(r * reps + rep)]);
      for (int r = 0; r < P; ++r) lag += (slowest - all[size_t(r * reps + rep)]) / double(P * reps);
      for (int r = 0; r < P; ++r) sum += all[size_t(r * reps + rep)] / double(P * reps);
    }
    *span = sum;
    return lag;
  };
  double long_span = 0.0;
  const double short_lag = mean_lag(2, 40, &out[1]), long_lag = mean_lag(16, 20, &long_span);
  out[0] = short_lag / (expected_max_of_normals(P) * out[1]);
  out[2] = short_lag > 0 && long_lag > 0 ? std::clamp(std::log(long_lag / short_lag) / std::log(long_span / out[1]), 0.0, 1.0)
                                         : 1.0;
}

// The closest curve (least squares) that never falls from one size to the next: runs of sizes whose
// times fall are replaced by their mean (pooling adjacent violators), which keeps the curve's level
// where a running minimum would carry one low sample down to every smaller size.
void never_falling(double* y, int n) {
  std::vector<double> level;
  std::vector<int> count;
  for (int i = 0; i < n; ++i) {
    level.push_back(y[i]);
    count.push_back(1);
    while (level.size() > 1 && level[level.size() - 2] > level.back()) {
      const size_t k = level.size() - 1;
      level[k - 1] = (level[k - 1] * count[k - 1] + level[k] * count[k]) / (count[k - 1] + count[k]);
      count[k - 1] += count[k];
      level.pop_back();
      count.pop_back();
    }
  }
  for (size_t k = 0, i = 0; k < level.size(); ++k)
    for (int j = 0; j < count[k]; ++j) y[i++] = level[k];
}

// One rank's measurements, on its pair of the node's ranks (every pair at once): the all-reduce by
// size alone (measure_alone), the computation's spread (measure_spread), the all-reduce beside a
// computation and what it takes of it (measure_beside): out[0..kSizes) seconds beside,
// out[kSizes..2·kSizes) alone, out[2·kSizes..3·kSizes) the computation's seconds lost beside,
// out[3·kSizes..3·kSizes + 3) measure_spread's.
void measure_link_rank(World& world, ProcessGroup& pair, double* out) {
  std::vector<float> buf(size_t(16) << 20, 1.0f);  // up to 64 MiB
  measure_alone(pair, buf, out + kSizes);
  measure_spread(world, out + 3 * kSizes);
  measure_beside(pair, buf, out, out + 2 * kSizes);
}

}  // namespace

Link measure_node_link(Hardware& h, int ranks_per_node) {
  const int P = std::max(2, ranks_per_node - ranks_per_node % 2);
  const std::string dir = (std::filesystem::temp_directory_path() / ("dtrain-calibrate-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  int fds[2];
  require(pipe(fds) == 0, "dtrain plan --calibrate: cannot make a pipe");
  std::vector<pid_t> kids(size_t(P), 0);
  for (int r = 0; r < P; ++r) {
    kids[size_t(r)] = fork();
    require(kids[size_t(r)] >= 0, "dtrain plan --calibrate: cannot start a local rank's process");
    if (kids[size_t(r)] > 0) continue;
    int code = 0;
    try {
      DistEnv env;
      env.rank = env.local_rank = r;
      env.world_size = env.local_world_size = P;
      env.store_dir = dir;
      env.token = "calibrate";
      omp_set_num_threads(1);
      World world(env, Millis(60000));
      std::shared_ptr<ProcessGroup> pair;
      for (int first = 0; first < P; first += 2) {
        std::shared_ptr<ProcessGroup> g = world.new_group({first, first + 1}, "pair" + std::to_string(first / 2));
        if (g) pair = g;
      }
      double out[3 * kSizes + 3];
      measure_link_rank(world, *pair, out);
      world.shutdown();
      if (r == 0 && write(fds[1], out, sizeof out) != ssize_t(sizeof out)) code = 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dtrain: calibrate rank %d: %s\n", r, e.what());
      code = 1;
    }
    std::_Exit(code);
  }
  close(fds[1]);
  double got[3 * kSizes + 3] = {};
  const ssize_t n = read(fds[0], got, sizeof got);
  close(fds[0]);
  int ok = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  std::filesystem::remove_all(dir);
  require(ok == P && n == ssize_t(sizeof got), "dtrain plan --calibrate: the local ranks could not measure an all-reduce "
                                               "(see the lines above)");
  // never falling with the bytes: where noise made a size slower than a larger one, both their mean
  never_falling(got, kSizes);
  never_falling(got + kSizes, kSizes);
  never_falling(got + 2 * kSizes, kSizes);
  for (int i = 0; i < kSizes; ++i) {
    h.allreduce_bytes.push_back(4.0 * double(size_t(1) << (2 * i)));
    h.allreduce_seconds.push_back(got[i]);
    h.allreduce_alone_seconds.push_back(got[kSizes + i]);
    h.allreduce_steal_seconds.push_back(got[2 * kSizes + i]);
  }
  h.jitter = std::min(1.0, got[3 * kSizes]);
  h.jitter_span_s = got[3 * kSizes + 1];
  h.jitter_growth = got[3 * kSizes + 2];
  // busbw = algbw × 2(n−1)/n = algbw for two ranks; a step's latency: half the smallest all-reduce
  return {h.allreduce_bytes.back() / got[kSizes - 1] / 1e9, got[0] / 2.0 * 1e6};
}

}  // namespace dtrain
