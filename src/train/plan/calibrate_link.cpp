// measure_node_link (see calibrate_link.hpp): all-reduces between local processes over Gloo, beside a
// computation and alone, and what they take of it.
#include "train/plan/calibrate_link.hpp"

#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "comm/world.hpp"
#include "core/error.hpp"
#include "kernels/device.hpp"

namespace dtrain {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSizes = 13;  // all-reduce sizes measured: 4 B × 4^i

template <class F>
double median_seconds(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// How much repeated timings of the same computation spread: their coefficient of variation (the
// sample standard deviation over the mean; Hardware::jitter).
double coefficient_of_variation(const std::vector<double>& t) {
  if (t.size() < 2) return 0.0;
  double mean = 0.0, squares = 0.0;
  for (double x : t) mean += x / double(t.size());
  for (double x : t) squares += (x / mean - 1.0) * (x / mean - 1.0);
  return std::sqrt(squares / double(t.size() - 1));
}

// A computation on its own thread (products of 256 × 256, counted), as a rank's cores compute in a job.
class BusyThread {
 public:
  BusyThread()
      : thread_([this] {
          omp_set_num_threads(1);
          const int64_t m = 256;
          std::vector<float> a(size_t(m * m), 0.5f), c(size_t(m * m), 0.0f);
          const MatmulArgs args{m, m, m, false, false, false, nullptr, Precision::f32};
          while (busy_.load()) {
            cpu_device().matmul(a.data(), a.data(), c.data(), args);
            ++done_;
          }
        }) {}
  ~BusyThread() {
    busy_ = false;
    thread_.join();
  }
  // Its products per second while f runs.
  template <class F>
  double rate_during(F&& f) {
    const int64_t before = done_.load();
    const auto t0 = Clock::now();
    f();
    return double(done_.load() - before) / std::chrono::duration<double>(Clock::now() - t0).count();
  }

 private:
  std::atomic<bool> busy_{true};
  std::atomic<int64_t> done_{0};
  std::thread thread_;
};

// All-reduces by size as a rank waits for one between its computations: each after a product of a
// millisecond or so (an idle machine's cores wake up slower: small all-reduces take ten times longer
// there than in a run; a product's data pushes the buffer out of the caches, as in a run) and a
// barrier (the ranks' uneven arrival is Hardware::jitter's). out[i]: the mean seconds at 4 B × 4^i
// (a step's time is the sum of its operations'); out[kSizes]: the spread of the product's times
// between the collectives, as a job alternates them (Hardware::jitter).
void measure_alone(World& world, ProcessGroup& pair, std::vector<float>& buf, double* out) {
  const int64_t m = 512;
  std::vector<float> a(size_t(m * m), 0.5f), c(size_t(m * m), 0.0f);
  const MatmulArgs args{m, m, m, false, false, false, nullptr, Precision::f32};
  std::vector<double> products;  // the product's times, for its spread (Hardware::jitter)
  for (int i = 0; i < kSizes; ++i) {
    const size_t n = size_t(1) << (2 * i);
    const int reps = n > (size_t(1) << 20) ? 9 : 41;
    double sum = 0.0;
    for (int rep = 0; rep < reps; ++rep) {
      const auto p0 = Clock::now();
      cpu_device().matmul(a.data(), a.data(), c.data(), args);
      products.push_back(std::chrono::duration<double>(Clock::now() - p0).count());
      world.all().barrier();
      const auto t0 = Clock::now();
      pair.allreduce(buf.data(), n);
      sum += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    out[i] = sum / reps;
  }
  out[kSizes] = coefficient_of_variation(products);
}

// One rank's measurements, on its pair of the node's ranks (every pair at once): the all-reduce by
// size beside a computation and alone (measure_alone), then what it takes of that computation, its
// products per second alone and beside 4 MiB all-reduces: out[0..kSizes) seconds beside,
// out[kSizes..2·kSizes) alone, out[2·kSizes] the products' spread, out[2·kSizes + 1] the share of the
// computation lost.
void measure_link_rank(World& world, ProcessGroup& pair, double* out) {
  std::vector<float> buf(size_t(16) << 20, 1.0f);  // up to 64 MiB
  measure_alone(world, pair, buf, out + kSizes);
  BusyThread busy;
  for (int i = 0; i < kSizes; ++i) {
    const size_t n = size_t(1) << (2 * i);  // 1, 4, 16, … floats: 4 B to 64 MiB
    world.all().barrier();
    out[i] = median_seconds(n > (size_t(1) << 20) ? 5 : 21, [&] { pair.allreduce(buf.data(), n); });
  }
  world.all().barrier();
  const double alone = busy.rate_during([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  world.all().barrier();
  const double beside = busy.rate_during([&] {
    for (int k = 0; k < 40; ++k) pair.allreduce(buf.data(), size_t(1) << 20);
  });
  out[2 * kSizes + 1] = std::clamp(1.0 - beside / alone, 0.0, 4.0);
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
      double out[2 * kSizes + 2];
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
  double got[2 * kSizes + 2] = {};
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
  // never falling with the bytes: a size's noise cut down to the next larger size's time
  for (int i = kSizes - 2; i >= 0; --i) {
    got[i] = std::min(got[i], got[i + 1]);
    got[kSizes + i] = std::min(got[kSizes + i], got[kSizes + i + 1]);
  }
  for (int i = 0; i < kSizes; ++i) {
    h.allreduce_bytes.push_back(4.0 * double(size_t(1) << (2 * i)));
    h.allreduce_seconds.push_back(got[i]);
    h.allreduce_alone_seconds.push_back(std::min(got[kSizes + i], got[i]));
  }
  h.jitter = std::min(1.0, got[2 * kSizes]);
  h.comm_steal = got[2 * kSizes + 1];
  // busbw = algbw × 2(n−1)/n = algbw for two ranks; a step's latency: half the smallest all-reduce
  return {h.allreduce_bytes.back() / got[kSizes - 1] / 1e9, got[0] / 2.0 * 1e6};
}

}  // namespace dtrain
