// Measured matmul peak of this CPU: f32 and bf16 throughput of dtrain::matmul (oneDNN) on large
// square-ish shapes, best of several runs; the denominator of the MFU that bench/compare.sh prints.
// Usage: matmul_peak [--threads 2] [--reps 10] [--shapes 1024x1024x1024,2048x2048x1024]
// Prints one JSON line: {"f32_gflops": …, "bf16_gflops": …, "shapes": [...], …}.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/device.hpp"  // cpu_has_native_bf16
#include "tensor/arena.hpp"

namespace {

struct Shape {
  int64_t M, N, K;
};

void usage() {
  std::fprintf(stderr,
               "usage: matmul_peak [--threads N] [--reps R] [--calls C] [--shapes MxNxK[,MxNxK...]]\n"
               "  --threads  OpenMP threads (default 2)\n"
               "  --reps     timed samples per shape and precision; the best counts (default 10)\n"
               "  --calls    matmul calls per sample (default 3)\n"
               "  --shapes   default 1024x1024x1024,2048x2048x1024\n");
}

int64_t to_int(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  dtrain::require(!v.empty() && *end == '\0' && x > 0, flag + " " + v + " is not a positive integer: give e.g. 2");
  return x;
}

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    long long m = 0, n = 0, k = 0;
    char tail = 0;
    dtrain::require(std::sscanf(item.c_str(), "%lldx%lldx%lld%c", &m, &n, &k, &tail) == 3 && m > 0 && n > 0 && k > 0,
                    "--shapes item '" + item + "' is not MxNxK: give e.g. 1024x1024x1024");
    out.push_back({m, n, k});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best GFLOP/s of `reps` samples, each `calls` back-to-back C = A·B^T (the Linear forward layout).
double measure(const Shape& s, dtrain::Precision p, int reps, int calls) {
  dtrain::AlignedBuffer a(sizeof(float) * s.M * s.K), b(sizeof(float) * s.N * s.K), c(sizeof(float) * s.M * s.N);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < s.M * s.K; ++i) a.f32()[i] = u(rng);
  for (int64_t i = 0; i < s.N * s.K; ++i) b.f32()[i] = u(rng);
  dtrain::MatmulArgs args{s.M, s.N, s.K, false, true, false, nullptr, p};
  for (int i = 0; i < 2; ++i) dtrain::matmul(a.f32(), b.f32(), c.f32(), args);  // primitive creation, page faults
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    for (int i = 0; i < calls; ++i) dtrain::matmul(a.f32(), b.f32(), c.f32(), args);
    best = std::min(best, (now_s() - t0) / calls);
  }
  return 2.0 * double(s.M) * double(s.N) * double(s.K) / best * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int threads = 2, reps = 10, calls = 3;
    std::string shapes_text = "1024x1024x1024,2048x2048x1024";
    for (int i = 1; i < argc; ++i) {
      std::string f = argv[i];
      if (f == "-h" || f == "--help") {
        usage();
        return 0;
      }
      dtrain::require(i + 1 < argc, "flag " + f + " needs a value: see --help");
      std::string v = argv[++i];
      if (f == "--threads") threads = int(to_int(f, v));
      else if (f == "--reps") reps = int(to_int(f, v));
      else if (f == "--calls") calls = int(to_int(f, v));
      else if (f == "--shapes") shapes_text = v;
      else throw dtrain::Error("unknown flag " + f + ": see --help");
    }
    const std::vector<Shape> shapes = parse_shapes(shapes_text);
    omp_set_num_threads(threads);

    dtrain::Json rows = dtrain::Json::array();
    double best_f32 = 0.0, best_bf16 = 0.0;
    for (const Shape& s : shapes) {
      for (auto p : {dtrain::Precision::f32, dtrain::Precision::bf16}) {
        const double g = measure(s, p, reps, calls);
        const bool bf = p == dtrain::Precision::bf16;
        (bf ? best_bf16 : best_f32) = std::max(bf ? best_bf16 : best_f32, g);
        dtrain::Json r = dtrain::Json::object();
        r["m"] = s.M;
        r["n"] = s.N;
        r["k"] = s.K;
        r["precision"] = bf ? "bf16" : "f32";
        r["gflops"] = std::round(g * 10.0) / 10.0;
        rows.push_back(r);
      }
    }
    dtrain::Json out = dtrain::Json::object();
    out["f32_gflops"] = std::round(best_f32 * 10.0) / 10.0;
    out["bf16_gflops"] = std::round(best_bf16 * 10.0) / 10.0;
    out["threads"] = omp_get_max_threads();
    out["reps"] = reps;
    out["calls"] = calls;
    out["native_bf16"] = dtrain::cpu_has_native_bf16();
    out["shapes"] = rows;
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "matmul_peak: %s\n", e.what());
    return 1;
  }
}
