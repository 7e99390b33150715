// moe_experts: the mixture-of-experts layer's expert products against a dense SwiGLU of the same active
// width over the same tokens (bench/moe.sh, part d). One MoeLayer (nn/moe_layer.hpp) routes R random
// tokens to k of E experts; then, alternating, each timed rep runs:
//   grouped  the experts' products as MoeLayer runs them: per expert e over its n_e routed rows,
//            forward gate_up [n_e,d]·[2f,d]ᵀ and down [n_e,f]·[d,f]ᵀ, backward the four gradient products
//            (6 matmuls per expert; Σ n_e = R·k), at the layer's first routing every time ("fixed": every
//            shape met before) and at a new random routing each rep ("new": new n_e, as a training step
//            brings them);
//   dense    the dense SwiGLU's products over the R tokens at width F = k·f (LlamaBlock's: the same 6
//            matmuls, one call each);
//   layer    MoeLayer::forward + backward whole (router, top-k, gather, the products, SwiGLU, combine,
//            balance loss) on new random tokens (a new routing), and on the first tokens again (fixed);
//   ffn      the dense feed-forward whole: its products and SwiGLU forward and backward.
// Both product sets do 18·R·k·d·f FLOPs. Prints one JSON line: median ms per rep of each, the products'
// GFLOP/s, the ratios to dense, the first routing's rows per expert. dtrain's CPU matmul builds (and
// keeps) one oneDNN primitive per shape, so a product over a row count not met before pays for a new
// primitive: the difference between "fixed" and "new".
// Usage: moe_experts [--rows 2048] [--seq 128] [--dim 256] [--experts 8] [--top-k 2] [--expert-ff 384]
//                    [--threads 2] [--reps 10] [--precision f32|bf16] [--seed 1]
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
#include "kernels/device.hpp"
#include "nn/moe_layer.hpp"
#include "tensor/arena.hpp"

namespace {

using namespace dtrain;

const char* kUsage =
    "usage: moe_experts [--rows R] [--seq T] [--dim d] [--experts E] [--top-k k] [--expert-ff f]\n"
    "                   [--threads N] [--reps N] [--precision f32|bf16] [--seed S]\n"
    "  --rows       tokens of the batch (default 2048: 16 samples of 128)\n"
    "  --seq        tokens per sample, for the balance loss (default 128; divides --rows)\n"
    "  --dim, --experts, --top-k, --expert-ff   the layer (default 256, 8, 2, 384); the dense SwiGLU is\n"
    "               top-k × expert-ff wide\n"
    "  --threads    OpenMP threads (default 2); --reps timed reps, the median counts (default 10)\n";

int64_t to_int(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  require(!v.empty() && *end == '\0' && x > 0, flag + " " + v + " is not a positive integer: give e.g. 2");
  return x;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void fill(std::vector<float>& v, float scale, std::mt19937& g) {
  std::uniform_real_distribution<float> u(-scale, scale);
  for (float& x : v) x = u(g);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A SwiGLU's six products over `rows` rows of width d, hidden width f (LlamaBlock's and each expert's):
// forward h = x·Wguᵀ, y = a·Wdᵀ; backward da = g·Wd, dWd += gᵀ·a, dWgu += dhᵀ·x, dx = dh·Wgu. With
// `swiglu`, the activation and its backward between them (the feed-forward whole). pieces: each
// product in MoeLayer's row pieces (moe_row_pieces), as it runs an expert's; else one call over all rows.
struct Swiglu {
  const float *x, *wgu, *wd;
  float *dwgu, *dwd, *h, *a, *y, *g, *da, *dh, *dx;
  void run(ComputeDevice& dev, int64_t rows, int64_t d, int64_t f, Precision p, bool swiglu, bool pieces) const {
    auto each = [&](auto&& product) {
      if (pieces)
        moe_row_pieces(rows, product);
      else
        product(int64_t(0), rows);
    };
    each([&](int64_t r, int64_t m) { dev.matmul(x + r * d, wgu, h + r * 2 * f, linear_forward_args(m, d, 2 * f, nullptr, p)); });
    if (swiglu) dev.swiglu_forward(h, a, rows, f);
    each([&](int64_t r, int64_t m) { dev.matmul(a + r * f, wd, y + r * d, linear_forward_args(m, f, d, nullptr, p)); });
    each([&](int64_t r, int64_t m) { dev.matmul(g + r * d, wd, da + r * f, linear_backward_input_args(m, f, d, false, p)); });
    each([&](int64_t r, int64_t m) { dev.matmul(g + r * d, a + r * f, dwd, linear_backward_weight_args(m, f, d, p)); });
    if (swiglu) dev.swiglu_backward(h, da, dh, rows, f);
    each([&](int64_t r, int64_t m) { dev.matmul(dh + r * 2 * f, x + r * d, dwgu, linear_backward_weight_args(m, d, 2 * f, p)); });
    each([&](int64_t r, int64_t m) { dev.matmul(dh + r * 2 * f, wgu, dx + r * d, linear_backward_input_args(m, d, 2 * f, false, p)); });
  }
};

// Buffers of a SwiGLU over `rows` rows (random inputs and weights, zeroed gradients).
struct SwigluBuffers {
  std::vector<float> x, wgu, wd, dwgu, dwd, h, a, y, g, da, dh, dx;
  SwigluBuffers(int64_t rows, int64_t d, int64_t f, std::mt19937& rng)
      : x(size_t(rows * d)), wgu(size_t(2 * f * d)), wd(size_t(d * f)), dwgu(wgu.size()), dwd(wd.size()),
        h(size_t(rows * 2 * f)), a(size_t(rows * f)), y(size_t(rows * d)), g(size_t(rows * d)), da(a.size()),
        dh(h.size()), dx(x.size()) {
    fill(x, 1.0f, rng);
    fill(g, 1.0f, rng);
    fill(wgu, std::sqrt(6.0f / float(d + 2 * f)), rng);
    fill(wd, std::sqrt(6.0f / float(d + f)), rng);
    fill(h, 1.0f, rng);
    fill(a, 1.0f, rng);
    fill(da, 1.0f, rng);
    fill(dh, 1.0f, rng);
  }
  Swiglu at(int64_t row, int64_t d, int64_t f, float* wgu_e, float* wd_e, float* dwgu_e, float* dwd_e) {
    return {x.data() + row * d, wgu_e, wd_e, dwgu_e, dwd_e, h.data() + row * 2 * f, a.data() + row * f,
            y.data() + row * d, g.data() + row * d, da.data() + row * f, dh.data() + row * 2 * f,
            dx.data() + row * d};
  }
};

}  // namespace

int main(int argc, char** argv) {
  try {
    int64_t R = 2048, T = 128, d = 256, E = 8, k = 2, f = 384, threads = 2, reps = 10, seed = 1;
    Precision p = Precision::f32;
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "-h" || flag == "--help") {
        std::fputs(kUsage, stdout);
        return 0;
      }
      require(i + 1 < argc, "flag " + flag + " needs a value: see --help");
      const std::string v = argv[++i];
      if (flag == "--precision") {
        require(v == "f32" || v == "bf16", "--precision " + v + " is unknown: use f32 or bf16");
        p = v == "bf16" ? Precision::bf16 : Precision::f32;
        continue;
      }
      int64_t* target = flag == "--rows"        ? &R
                        : flag == "--seq"       ? &T
                        : flag == "--dim"       ? &d
                        : flag == "--experts"   ? &E
                        : flag == "--top-k"     ? &k
                        : flag == "--expert-ff" ? &f
                        : flag == "--threads"   ? &threads
                        : flag == "--reps"      ? &reps
                        : flag == "--seed"      ? &seed
                                                : nullptr;
      require(target != nullptr, "unknown flag " + flag + ": see --help");
      *target = to_int(flag, v);
    }
    require(R % T == 0, "--rows " + std::to_string(R) + " is not a multiple of --seq " + std::to_string(T));
    require(k <= E, "--top-k is more than --experts: a token goes through at most every expert");
    require(d % 16 == 0, "--dim must be a multiple of 16 (MoeLayer keeps gate and up adjacent)");
    omp_set_num_threads(int(threads));
    ComputeDevice& dev = cpu_device();
    std::mt19937 rng{uint32_t(seed)};

    // The MoE layer: router and experts in one unit, random weights of Xavier's scale.
    MoeSpec spec;
    spec.dim = d;
    spec.experts = E;
    spec.top_k = k;
    spec.expert_ff = f;
    Unit unit{"layer"};
    MoeLayer layer(dev, unit, unit, "mlp.", spec);
    std::vector<float> params(size_t(unit.numel())), grads(params.size(), 0.0f);
    fill(params, std::sqrt(6.0f / float(d + 2 * f)), rng);
    unit.bind(params.data(), grads.data());
    Arena arena;
    layer.plan(arena, R, 1);
    std::vector<float> scratch(size_t(layer.scratch_floats(R)));
    std::vector<float> x(size_t(R * d)), y(x.size()), dy(x.size()), dx(x.size());
    fill(x, 1.0f, rng);
    fill(dy, 1e-3f, rng);
    auto layer_pass = [&] {
      layer.forward(x.data(), y.data(), R, T, SequenceShard{}, 0, scratch.data(), p);
      layer.backward(x.data(), dy.data(), dx.data(), R, 0.01f, 0, scratch.data(), p);
    };
    layer_pass();
    const std::vector<int64_t> counts = layer.tokens_per_expert(0);  // the routing the grouped products follow

    // The grouped products: each expert's own weights, its rows of one [R·k] buffer, as MoeLayer lays them out.
    SwigluBuffers grouped(R * k, d, f, rng);
    std::vector<float> ew(size_t(E * 3 * f * d)), egrad(ew.size(), 0.0f);
    fill(ew, std::sqrt(6.0f / float(d + 2 * f)), rng);
    auto grouped_pass = [&](const std::vector<int64_t>& n_e, bool swiglu) {
      int64_t at = 0;
      for (int64_t e = 0; e < E; ++e) {
        const int64_t n = n_e[size_t(e)];
        float* w = ew.data() + e * 3 * f * d;
        float* gw = egrad.data() + e * 3 * f * d;
        if (n > 0) grouped.at(at, d, f, w, w + 2 * f * d, gw, gw + 2 * f * d).run(dev, n, d, f, p, swiglu, true);
        at += n;
      }
    };
    // A new routing, as each training step brings: every token to k distinct experts drawn at random.
    auto new_routing = [&] {
      std::vector<int64_t> n_e(size_t(E), 0);
      std::vector<int64_t> order(static_cast<size_t>(E));
      for (int64_t t = 0; t < R; ++t) {
        for (int64_t e = 0; e < E; ++e) order[size_t(e)] = e;
        for (int64_t j = 0; j < k; ++j) {
          std::uniform_int_distribution<int64_t> pick(j, E - 1);
          std::swap(order[size_t(j)], order[size_t(pick(rng))]);
          ++n_e[size_t(order[size_t(j)])];
        }
      }
      return n_e;
    };
    // The dense SwiGLU of width F = k·f over the R tokens.
    const int64_t F = k * f;
    SwigluBuffers dense(R, d, F, rng);
    std::vector<float> dgrad(size_t(3 * F * d), 0.0f);
    const Swiglu dense_call = dense.at(0, d, F, dense.wgu.data(), dense.wd.data(), dgrad.data(), dgrad.data() + 2 * F * d);

    // Each rep alternates: the products at a fixed routing (every shape seen before: oneDNN's primitives
    // cached), at a new routing (new row counts, as in training), the dense products; the layer and the
    // dense feed-forward whole, the layer on new tokens (so a new routing).
    std::vector<double> t_fixed, t_new, t_dense, t_layer, t_layer_fixed, t_ffn;
    auto time = [](std::vector<double>& into, auto&& fn) {
      const double t0 = now_s();
      fn();
      into.push_back(now_s() - t0);
    };
    for (int w = 0; w < 2; ++w) {  // primitive creation, page faults
      grouped_pass(counts, true);
      dense_call.run(dev, R, d, F, p, true, false);
      layer_pass();
    }
    std::vector<float> x_fixed = x;
    int64_t new_shapes = 0;
    for (int64_t r = 0; r < reps; ++r) {
      const std::vector<int64_t> fresh = new_routing();
      time(t_fixed, [&] { grouped_pass(counts, false); });
      time(t_new, [&] { grouped_pass(fresh, false); });
      time(t_dense, [&] { dense_call.run(dev, R, d, F, p, false, false); });
      fill(x, 1.0f, rng);
      time(t_layer, layer_pass);
      x.swap(x_fixed);
      time(t_layer_fixed, layer_pass);  // the first routing again
      x.swap(x_fixed);
      time(t_ffn, [&] { dense_call.run(dev, R, d, F, p, true, false); });
      for (int64_t e = 0; e < E; ++e) new_shapes += fresh[size_t(e)] != counts[size_t(e)];
    }
    const double flops = 18.0 * double(R) * double(k) * double(d) * double(f);
    const double gf = median(t_fixed), gn = median(t_new), dn = median(t_dense), l = median(t_layer),
                 lf = median(t_layer_fixed), ff = median(t_ffn);
    auto r3 = [](double v) { return std::round(v * 1e3) / 1e3; };
    auto r1 = [](double v) { return std::round(v * 10.0) / 10.0; };
    Json out = Json::object();
    out["rows"] = R;
    out["dim"] = d;
    out["experts"] = E;
    out["top_k"] = k;
    out["expert_ff"] = f;
    out["dense_ff"] = F;
    out["precision"] = p == Precision::bf16 ? "bf16" : "f32";
    out["threads"] = omp_get_max_threads();
    out["reps"] = reps;
    out["rows_per_expert"] = counts;
    out["product_flops"] = flops;
    out["grouped_fixed_ms"] = r3(gf * 1e3);
    out["grouped_new_ms"] = r3(gn * 1e3);
    out["dense_products_ms"] = r3(dn * 1e3);
    out["grouped_fixed_gflops"] = r1(flops / gf * 1e-9);
    out["grouped_new_gflops"] = r1(flops / gn * 1e-9);
    out["dense_gflops"] = r1(flops / dn * 1e-9);
    out["fixed_over_dense"] = r3(dn / gf);
    out["new_over_dense"] = r3(dn / gn);
    out["moe_layer_ms"] = r3(l * 1e3);
    out["moe_layer_fixed_ms"] = r3(lf * 1e3);
    out["dense_ffn_ms"] = r3(ff * 1e3);
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe_experts: %s\n", e.what());
    return 1;
  }
}
