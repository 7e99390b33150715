// A feed-forward's first Linear backward with its output gradient kept in f32 against kept in bf16
// (train.precision = bf16 keeps it so): the ReLU backward from its bf16 output (in place in f32, into a
// bf16 buffer otherwise), the bias sum, then the two products (which round an f32 gradient first),
// the input and the weights in bf16 as a bf16 run has them. Best of several runs each, alternated.
// Usage: grad_bf16 [--rows 16384] [--ff 2048] [--dim 128] [--reps 7]   (defaults: the course preset's
// fc1 at batch 512). Prints one JSON line with both times, their parts and the ratio bf16 / f32.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.hpp"
#include "core/json.hpp"
#include "kernels/device.hpp"

namespace {

using namespace dtrain;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Parts {
  double relu = 1e9, bias = 1e9, products = 1e9, total = 1e9;
  void keep(double t0, double t1, double t2, double t3) {
    relu = std::min(relu, t1 - t0);
    bias = std::min(bias, t2 - t1);
    products = std::min(products, t3 - t2);
    total = std::min(total, t3 - t0);
  }
  Json json() const {
    return {{"relu_ms", 1e3 * relu}, {"bias_ms", 1e3 * bias}, {"products_ms", 1e3 * products}, {"ms", 1e3 * total}};
  }
};

std::vector<uint16_t> random_bf16(int64_t n, float scale, std::mt19937& g) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = to_bf16(d(g)).bits;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t R = 16384, F = 2048, D = 128;
  int64_t reps_value = 7;
  int reps = 7;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    char* end = nullptr;
    const long long v = i + 1 < argc ? std::strtoll(argv[i + 1], &end, 10) : 0;
    const bool known = k == "--rows" || k == "--ff" || k == "--dim" || k == "--reps";
    if (!known) {
      std::fprintf(stderr, "grad_bf16: unknown option %s (use --rows, --ff, --dim, --reps)\n", k.c_str());
      return 2;
    }
    if (i + 1 >= argc || *end != '\0' || v < 1 || v > (1 << 24)) {
      std::fprintf(stderr, "grad_bf16: %s needs a whole number from 1 to 16777216\n", k.c_str());
      return 2;
    }
    (k == "--rows" ? R : k == "--ff" ? F : k == "--dim" ? D : reps_value) = v;
  }
  reps = int(reps_value);
  ComputeDevice& dev = cpu_device();
  std::mt19937 g(1);
  const int64_t n = R * F;
  const std::vector<uint16_t> y = random_bf16(n, 1.0f, g), x = random_bf16(R * D, 1.0f, g),
                              W = random_bf16(F * D, 0.02f, g);
  std::vector<float> dy(static_cast<size_t>(n)), grad(dy.size()), dW(static_cast<size_t>(F * D)),
      db(static_cast<size_t>(F)), dx(static_cast<size_t>(R * D));
  std::normal_distribution<float> d(0.0f, 1e-3f);
  for (auto& v : dy) v = d(g);
  std::vector<uint16_t> grad16(static_cast<size_t>(n));
  Parts f32, b16;
  for (int r = 0; r < reps; ++r) {
    for (const bool kept_bf16 : {false, true}) {
      std::memcpy(grad.data(), dy.data(), sizeof(float) * size_t(n));
      const ActBuffer out = kept_bf16 ? ActBuffer(grad16.data()) : ActBuffer(grad.data());
      const double t0 = now();
      dev.relu_backward_from_output(y.data(), grad.data(), out, n, 1.1f);
      const double t1 = now();
      dev.colsum_accumulate(out, db.data(), R, F);
      const double t2 = now();
      dev.linear_backward(x.data(), out, W.data(), dW.data(), dx.data(), R, D, F, false, Precision::bf16);
      const double t3 = now();
      (kept_bf16 ? b16 : f32).keep(t0, t1, t2, t3);
    }
  }
  const Json out{{"rows", R},           {"ff", F},
                 {"dim", D},            {"reps", reps},
                 {"native_bf16", cpu_has_native_bf16()},
                 {"f32_gradient", f32.json()},
                 {"bf16_gradient", b16.json()},
                 {"ratio_bf16_over_f32", b16.total / f32.total}};
  std::printf("%s\n", out.dump().c_str());
}
