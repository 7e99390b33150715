// Collectives of dtrain's process groups over Gloo and over MPI, side by side in one run (launched
// by bench/collectives.sh under mpirun): all-reduce, all-gather, reduce-scatter and send/recv
// (each rank sends to the next and receives from the previous), f32, the two backends alternating
// call by call; time, algorithm bandwidth and bus bandwidth as nccl-tests reports them, the MPI/Gloo
// ratio, and memcpy of the same size as the memory-bandwidth limit. Rank 0 prints a table per
// operation and one JSON line per row on stderr.
// usage (under mpirun): bench_collectives [--min-kb K] [--max-mb M] [--ops all-reduce,send/recv,...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_plugin.hpp"
#include "comm/world.hpp"

using namespace dtrain;
using Clock = std::chrono::steady_clock;

namespace {

int reps_for(size_t bytes) { return bytes <= (1u << 20) ? 100 : bytes <= (16u << 20) ? 12 : 4; }

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Median seconds per call of f and of g, `reps` calls each, alternating (and which goes first), after
// one warm-up call of each, so that the machine's drift hits both alike. Every rank calls it alike.
template <class F, class G>
std::pair<double, double> alternate(int reps, F&& f, G&& g) {
  f();
  g();
  std::vector<double> tf, tg;
  for (int i = 0; i < reps; ++i) {
    for (int k = 0; k < 2; ++k) {
      const bool first_f = (i + k) % 2 == 0;
      const auto t0 = Clock::now();
      first_f ? f() : g();
      (first_f ? tf : tg).push_back(seconds(t0));
    }
  }
  std::sort(tf.begin(), tf.end());
  std::sort(tg.begin(), tg.end());
  return {tf[tf.size() / 2], tg[tg.size() / 2]};
}

struct Op {
  const char* name;
  double bus_factor;  // nccl-tests: busbw = algbw × this
};

std::string size_text(size_t b) {
  char s[32];
  if (b >= (1u << 20))
    std::snprintf(s, sizeof s, "%zu MiB", b >> 20);
  else
    std::snprintf(s, sizeof s, "%zu KiB", b >> 10);
  return s;
}

struct BenchArgs {
  size_t min_kb = 4, max_mb = 256;
  std::string only = "all-reduce,all-gather,reduce-scatter,send/recv";
};

BenchArgs parse_args(int argc, char** argv) {
  BenchArgs args;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--min-kb")) args.min_kb = size_t(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--max-mb")) args.max_mb = size_t(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--ops")) args.only = argv[i + 1];
  }
  return args;
}

// The two groups over the same ranks (Gloo: the world's; MPI: through the plugin) and the buffers
// every call reads and writes: a (sent, summed), b (received), dst (memcpy's target).
struct Bench {
  ProcessGroup& gloo;
  ProcessGroup& mpi;
  int n = 0, r = 0;
  std::vector<float> a, b, dst;
};

// One call of op on `bytes` bytes of floats over group g.
void run_op(Bench& bench, ProcessGroup& g, const Op& op, size_t bytes) {
  const int n = bench.n, r = bench.r;
  const size_t count = bytes / 4;          // elements of the size (nccl-tests' "size")
  const size_t share = count / size_t(n);  // all-gather's input, reduce-scatter's output
  if (!std::strcmp(op.name, "all-reduce")) {
    g.allreduce(bench.a.data(), count, ReduceOp::sum);
  } else if (!std::strcmp(op.name, "all-gather")) {
    g.allgather(bench.a.data(), bench.b.data(), share, ElemType::f32);
  } else if (!std::strcmp(op.name, "reduce-scatter")) {
    const std::vector<size_t> shares(size_t(n), share);
    g.reduce_scatter_async(bench.a.data(), bench.b.data(), shares, ElemType::f32, ReduceOp::sum)->wait();
  } else {
    auto s = g.send_async(bench.a.data(), bytes, (r + 1) % n, 1);
    g.recv_async(bench.b.data(), bytes, (r + n - 1) % n, 1)->wait();
    s->wait();
  }
}

void print_op_header(const Op& op) {
  std::printf("\n%s\n%10s | %10s %9s %9s | %10s %9s %9s | %9s | %9s %11s\n", op.name, "size", "Gloo time", "algbw",
              "busbw", "MPI time", "algbw", "busbw", "MPI/Gloo", "memcpy", "MPI/memcpy");
  std::printf("%10s | %10s %9s %9s | %10s %9s %9s | %9s | %9s %11s\n", "", "us", "GB/s", "GB/s", "us", "GB/s", "GB/s",
              "busbw", "GB/s", "busbw");
}

// Times op at one size on both backends (and memcpy); rank 0 prints the table row and the JSON line.
void bench_size(Bench& bench, const Op& op, size_t bytes) {
  bench.gloo.barrier();
  const int reps = reps_for(bytes);
  const auto [tg, tm] =
      alternate(reps, [&] { run_op(bench, bench.gloo, op, bytes); }, [&] { run_op(bench, bench.mpi, op, bytes); });
  const double tc = alternate(reps, [&] { std::memcpy(bench.dst.data(), bench.b.data(), bytes); }, [] {}).first;
  std::fill(bench.a.begin(), bench.a.end(), 1.0f);  // sums stay finite
  if (bench.r != 0) return;
  const double gb = double(bytes) / 1e9;
  const double bus_g = gb / tg * op.bus_factor, bus_m = gb / tm * op.bus_factor;
  std::printf("%10s | %10.1f %9.3f %9.3f | %10.1f %9.3f %9.3f | %8.2fx | %9.2f %10.2fx\n", size_text(bytes).c_str(),
              tg * 1e6, gb / tg, bus_g, tm * 1e6, gb / tm, bus_m, bus_m / bus_g, gb / tc, bus_m / (gb / tc));
  std::fprintf(stderr,
               "{\"op\": \"%s\", \"bytes\": %zu, \"ranks\": %d, \"gloo_s\": %.9f, \"mpi_s\": %.9f, "
               "\"memcpy_s\": %.9f, \"gloo_busbw_gbs\": %.4f, \"mpi_busbw_gbs\": %.4f, \"mpi_over_gloo\": %.4f}\n",
               op.name, bytes, bench.n, tg, tm, tc, bus_g, bus_m, bus_m / bus_g);
  std::fflush(stdout);
}

// Every chosen op at every size from min_kb to max_mb, by factors of 4.
void bench_ops(Bench& bench, const BenchArgs& args, World& world, const std::string& version) {
  const int n = bench.n;
  std::vector<size_t> sizes;
  for (size_t b = args.min_kb << 10; b <= args.max_mb << 20; b *= 4) sizes.push_back(b);
  const size_t most = sizes.back();
  bench.a.assign(most / 4 + n, 1.0f);
  bench.b.assign(most / 4 + n, 0.0f);
  bench.dst.assign(most / 4, 0.0f);
  if (bench.r == 0) {
    std::printf("%d ranks on %s; Gloo (TCP loopback) vs %s; f32; median of alternating calls\n", n,
                world.layout().c_str(), version.c_str());
    std::printf("busbw as nccl-tests: all-reduce algbw × 2(n-1)/n, all-gather and reduce-scatter × (n-1)/n, "
                "send/recv × 1; memcpy: one copy of the size, this rank's memory bandwidth\n");
  } else {
    world.layout();
  }
  const Op ops[] = {{"all-reduce", 2.0 * (n - 1) / n}, {"all-gather", double(n - 1) / n},
                    {"reduce-scatter", double(n - 1) / n}, {"send/recv", 1.0}};
  for (const Op& op : ops) {
    if (("," + args.only + ",").find(std::string(",") + op.name + ",") == std::string::npos) continue;
    if (bench.r == 0) print_op_header(op);
    for (size_t bytes : sizes) bench_size(bench, op, bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const BenchArgs args = parse_args(argc, argv);
  try {
    const DistEnv env = detect_env();
    if (!env.mpi_launched || env.world_size < 2) {
      std::fprintf(stderr, "bench_collectives: start it with mpirun (bench/collectives.sh), 2 ranks or more\n");
      return 2;
    }
    World world(env, Millis(600000));  // Gloo: the world's group
    const MpiBackendApi& api = mpi_backend("bench_collectives");
    int mpi_rank = -1, mpi_size = 0;
    std::string version;
    api.init(&mpi_rank, &mpi_size, &version);
    std::vector<int> everyone;
    for (int r = 0; r < world.size(); ++r) everyone.push_back(r);
    auto mpi = std::make_unique<ProcessGroup>("mpi", everyone, world.rank(), Millis(600000), nullptr,
                                              api.connect(everyone, 0, "mpi"));
    Bench bench{world.all(), *mpi, world.size(), world.rank(), {}, {}, {}};
    bench_ops(bench, args, world, version);
    mpi.reset();
    world.shutdown();
    api.finalize();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_collectives: %s\n", e.what());
    return 1;
  }
}
