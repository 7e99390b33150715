// calibrate_this_machine (see calibrate.hpp).
#include "train/plan/calibrate.hpp"

#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "comm/world.hpp"
#include "kernels/device.hpp"
#include "tensor/memory.hpp"
#include "train/report/memory_account.hpp"

namespace dtrain {

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double best_seconds(int reps, F&& f) {
  f();  // warm-up (oneDNN makes its kernel here)
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

double matmul_tflops(Precision p) {
  const int64_t n = 1024;
  std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f), c(size_t(n * n));
  const MatmulArgs args{n, n, n, false, false, false, nullptr, p};
  const double s = best_seconds(5, [&] { cpu_device().matmul(a.data(), b.data(), c.data(), args); });
  return 2.0 * double(n * n * n) / s / 1e12;
}

double memory_gbs() {
  const int64_t n = int64_t(1) << 26;  // 256 MiB per array: past every cache
  std::vector<float> a(size_t(n), 1.0f), b(size_t(n), 2.0f), c(size_t(n), 0.0f);
  const double s = best_seconds(5, [&] { cpu_device().add(a.data(), b.data(), c.data(), n); });
  return 3.0 * double(n) * sizeof(float) / s / 1e9;  // two reads, one write
}

// All-reduce between two local processes over Gloo: {bus GB/s at 64 MiB, latency µs from 4 bytes}.
Link local_link() {
  const std::string dir = (std::filesystem::temp_directory_path() / ("dtrain-calibrate-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  int fds[2];
  require(pipe(fds) == 0, "dtrain plan --calibrate: cannot make a pipe");
  pid_t kids[2];
  for (int r = 0; r < 2; ++r) {
    kids[r] = fork();
    require(kids[r] >= 0, "dtrain plan --calibrate: cannot start a second process");
    if (kids[r] > 0) continue;
    int code = 0;
    try {
      DistEnv env;
      env.rank = env.local_rank = r;
      env.world_size = env.local_world_size = 2;
      env.store_dir = dir;
      env.token = "calibrate";
      omp_set_num_threads(1);
      World world(env, Millis(60000));
      std::vector<float> big(size_t(16) << 20, 1.0f);  // 64 MiB
      float small = 1.0f;
      const double bw = best_seconds(3, [&] { world.all().allreduce(big.data(), big.size()); });
      const double lat = best_seconds(50, [&] { world.all().allreduce(&small, 1); });
      world.shutdown();
      if (r == 0) {
        const double out[2] = {double(big.size() * sizeof(float)) / bw / 1e9, lat / 2.0 * 1e6};  // busbw = algbw × 2(n−1)/n = algbw
        if (write(fds[1], out, sizeof out) != ssize_t(sizeof out)) code = 1;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dtrain: calibrate rank %d: %s\n", r, e.what());
      code = 1;
    }
    std::_Exit(code);
  }
  close(fds[1]);
  double got[2] = {0, 0};
  const ssize_t n = read(fds[0], got, sizeof got);
  close(fds[0]);
  int ok = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  std::filesystem::remove_all(dir);
  require(ok == 2 && n == ssize_t(sizeof got), "dtrain plan --calibrate: the two local ranks could not measure an all-reduce "
                                               "(see the lines above)");
  return {got[0], got[1]};
}

}  // namespace

Hardware calibrate_this_machine(int ranks_per_node) {
  Hardware h;
  h.name = "this machine";
  h.source = "measured";
  const int cores = omp_get_max_threads();
  const int threads = std::max(1, cores / std::max(1, ranks_per_node));
  omp_set_num_threads(threads);
  h.matmul_tflops_f32 = matmul_tflops(Precision::f32);
  h.matmul_tflops_bf16 = matmul_tflops(Precision::bf16);
  h.memory_gbs = memory_gbs();
  // what a process holds besides its model once its kernels have run (their libraries, threads, scratch)
  h.process_gib = double(resident_bytes()) / double(1 << 30);
  omp_set_num_threads(cores);
  const size_t avail = available_host_bytes();
  h.memory_gib = double(avail == SIZE_MAX ? 0 : avail) / double(1 << 30) / std::max(1, ranks_per_node);
  h.ranks_per_node = std::max(1, ranks_per_node);
  h.intra = local_link();
  h.inter = h.intra;  // one machine: no network measured (give a cluster's in its profile)
  h.algorithm = "ring";
  char name[128];
  std::snprintf(name, sizeof name, "this machine (%d cores, %d rank%s of %d thread%s)", cores, h.ranks_per_node,
                h.ranks_per_node == 1 ? "" : "s", threads, threads == 1 ? "" : "s");
  h.name = name;
  return h;
}

}  // namespace dtrain
