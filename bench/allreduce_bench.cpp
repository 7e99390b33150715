// Allreduce bandwidth on this machine, side by side in one run: dtrain's process group (Gloo
// backend, async work, store bootstrap) vs Gloo used directly (its own FileStore and options
// API, same ring algorithm) vs memcpy, for 1 KiB to 256 MiB between forked local ranks.
// Prints a table and one JSON line per size. usage: bench_allreduce [--ranks N] [--max-mb M]
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/tcp_store.hpp"
#include "comm/world.hpp"

using namespace dtrain;
using Clock = std::chrono::steady_clock;

namespace {

int reps_for(size_t bytes) { return bytes <= (1u << 20) ? 200 : bytes <= (16u << 20) ? 20 : 5; }

// Median seconds of f and of g over `reps` calls each, alternating f, g, f, g … so that the
// machine's slow drift hits both alike (after 2 warm-up calls of each).
template <class F, class G>
std::pair<double, double> alternate(int reps, F&& f, G&& g) {
  for (int i = 0; i < 2; ++i) {
    f();
    g();
  }
  std::vector<double> tf, tg;
  auto time = [](auto&& h) {
    auto t0 = Clock::now();
    h();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  for (int i = 0; i < reps; ++i) {
    if (i % 2) {
      tf.push_back(time(f));
      tg.push_back(time(g));
    } else {  // alternate which goes first too
      tg.push_back(time(g));
      tf.push_back(time(f));
    }
  }
  std::sort(tf.begin(), tf.end());
  std::sort(tg.begin(), tg.end());
  return {tf[tf.size() / 2], tg[tg.size() / 2]};
}

struct Row {
  size_t bytes;
  double dtrain_s, gloo_s, memcpy_s;
};

// One rank's measurements; rank 0 writes them to `out_fd`.
void rank_main(int rank, int n, int store_port, const std::string& gloo_dir, const std::vector<size_t>& sizes,
               int out_fd) {
  DistEnv env;
  env.rank = rank;
  env.world_size = env.local_world_size = n;
  env.local_rank = rank;
  env.agent_store = true;
  env.master_port = store_port;
  env.token = "bench";
  World world(env, Millis(120000));

  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore fstore(gloo_dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(120));
  ctx->connectFullMesh(fstore, dev);

  std::vector<float> buf(sizes.back() / sizeof(float), 1.0f), dst(buf.size());
  uint32_t tag = 1;
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    const int reps = reps_for(bytes);
    world.all().barrier();
    auto [ours, raw] = alternate(
        reps, [&] { world.all().allreduce(buf.data(), count, ReduceOp::sum); },
        [&] {
          gloo::AllreduceOptions o(ctx);
          o.setOutput(buf.data(), count);
          o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
          o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
          o.setTag(tag++);
          gloo::allreduce(o);
        });
    const double copy = alternate(reps, [&] { std::memcpy(dst.data(), buf.data(), bytes); }, [] {}).first;
    if (rank == 0) {
      Row r{bytes, ours, raw, copy};
      (void)!write(out_fd, &r, sizeof r);
    }
    std::fill(buf.begin(), buf.end(), 1.0f);  // keep values finite
  }
  world.shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  int n = 2;
  size_t max_mb = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--ranks")) n = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--max-mb")) max_mb = size_t(std::atoi(argv[i + 1]));
  }
  std::vector<size_t> sizes;
  for (size_t b = 1024; b <= max_mb << 20; b *= 4) sizes.push_back(b);
  const std::string gloo_dir = "/tmp/dtrain_bench_gloo_" + std::to_string(getpid());
  std::filesystem::create_directories(gloo_dir);
  TcpStoreServer server("127.0.0.1", 0, "bench");
  int p[2];
  if (pipe(p) != 0) return 1;
  std::vector<pid_t> kids;
  std::fflush(nullptr);
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      try {
        rank_main(r, n, server.port(), gloo_dir, sizes, p[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        _exit(1);
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  close(p[1]);
  std::printf("allreduce (sum, f32) between %d local ranks; bandwidth = bytes / median time\n", n);
  std::printf("%10s %14s %14s %8s %14s\n", "size", "dtrain GB/s", "raw Gloo GB/s", "ratio", "memcpy GB/s");
  Row r;
  while (read(p[0], &r, sizeof r) == sizeof r) {
    const double gb = double(r.bytes) / 1e9;
    char size[32];
    if (r.bytes >= (1u << 20)) {
      std::snprintf(size, sizeof size, "%zu MiB", r.bytes >> 20);
    } else {
      std::snprintf(size, sizeof size, "%zu KiB", r.bytes >> 10);
    }
    std::printf("%10s %14.3f %14.3f %7.2fx %14.2f\n", size, gb / r.dtrain_s, gb / r.gloo_s, r.gloo_s / r.dtrain_s,
                gb / r.memcpy_s);
    std::fprintf(stderr,
                 "{\"bytes\": %zu, \"dtrain_s\": %.9f, \"gloo_s\": %.9f, \"memcpy_s\": %.9f, \"ratio\": %.4f}\n",
                 r.bytes, r.dtrain_s, r.gloo_s, r.memcpy_s, r.gloo_s / r.dtrain_s);
    std::fflush(stdout);
  }
  int status = 0, bad = 0;
  for (pid_t k : kids) {
    waitpid(k, &status, 0);
    bad += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::filesystem::remove_all(gloo_dir);
  return bad ? 1 : 0;
}
