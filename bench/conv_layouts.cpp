// conv_layouts: oneDNN's convolution primitives for the MNIST network's two convolutions with plain nchw/oihw
// tensors (what src/kernels/cpu/conv.cpp asked for until it moved to blocked layouts) against format_tag::any (oneDNN's blocked layouts), f32 and bf16,
// plus the reorders a plain-layout model would pay around a blocked convolution. Threads: OMP_NUM_THREADS.
// Prints a readable line per case on stderr and one JSON line on stdout (bench/README.md, the cnn preset).
// Usage: OMP_NUM_THREADS=2 build/bin/conv_layouts [--batches 64,512] [--reps 30]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

struct Env {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream st{eng};
  int reps = 30;
};

// Mean milliseconds of f() over env.reps calls, after 3 untimed ones.
double time_ms(Env& env, const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  env.st.wait();
  double sum = 0.0;
  for (int i = 0; i < env.reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    env.st.wait();
    sum += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return sum / env.reps;
}

// One convolution (C → K channels, 3×3, no padding, H×H input) at batch N: forward, backward-data (not for the
// input convolution, `first`) and backward-weights, in plain or `any` layouts; returns its JSON object.
std::string run(Env& env, long N, long C, long H, long K, bool bf16, bool any, bool first) {
  const long P = H - 2;
  const Type in = bf16 ? Type::bf16 : Type::f32;
  const memory::dims xd{N, C, H, H}, wd{K, C, 3, 3}, bd{K}, yd{N, K, P, P}, strides{1, 1}, pad{0, 0};
  const Tag xt = any ? Tag::any : Tag::nchw, wt = any ? Tag::any : Tag::oihw;
  const Tag first_t = first ? Tag::nchw : xt;  // the input convolution reads plain pixels either way
  // plain: x, w and dy in the compute type, y, dx, dw in f32 (as conv.cpp); any: activations in the compute type
  const memory::desc x(xd, in, first_t), w(wd, in, wt), b(bd, Type::f32, Tag::x), y(yd, any ? in : Type::f32, xt);
  const memory::desc dx(xd, any ? in : Type::f32, first_t), dw(wd, Type::f32, wt), dy(yd, in, xt);
  const auto algo = dnnl::algorithm::convolution_direct;
  const dnnl::convolution_forward::primitive_desc fpd(
      {dnnl::prop_kind::forward_training, algo, x, w, b, y, strides, pad, pad}, env.eng);
  const dnnl::convolution_backward_data::primitive_desc dpd({algo, dx, w, dy, strides, pad, pad}, env.eng, fpd);
  const dnnl::convolution_backward_weights::primitive_desc wpd({algo, x, dw, b, dy, strides, pad, pad}, env.eng, fpd);
  auto make = [&](const memory::desc& d) { return memory(d, env.eng); };
  memory mx = make(fpd.src_desc()), mw = make(fpd.weights_desc()), mb = make(b), my = make(fpd.dst_desc());
  memory mdy = make(dpd.diff_dst_desc()), mdx = make(dpd.diff_src_desc());
  memory mdw = make(wpd.diff_weights_desc()), mdb = make(b), mdy_w = make(wpd.diff_dst_desc());
  const dnnl::convolution_forward fwd(fpd);
  const dnnl::convolution_backward_data bwd(dpd);
  const dnnl::convolution_backward_weights bww(wpd);
  const double f = time_ms(env, [&] {
    fwd.execute(env.st, {{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, my}});
  });
  const double d = first ? 0.0 : time_ms(env, [&] {
    bwd.execute(env.st, {{DNNL_ARG_DIFF_DST, mdy}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DIFF_SRC, mdx}});
  });
  const double g = time_ms(env, [&] {
    bww.execute(env.st, {{DNNL_ARG_SRC, mx}, {DNNL_ARG_DIFF_DST, mdy_w}, {DNNL_ARG_DIFF_WEIGHTS, mdw},
                         {DNNL_ARG_DIFF_BIAS, mdb}});
  });
  // what a model keeping plain f32 activations would add: y out of and dy into the blocked layout, and (not for
  // the input convolution) x into it and dx out of it
  double r = 0.0;
  if (any) {
    auto reorder_ms = [&](const memory::desc& from, const memory::desc& to) {
      memory a = make(from), c = make(to);
      const dnnl::reorder ro(a, c);
      return time_ms(env, [&] { ro.execute(env.st, a, c); });
    };
    const memory::desc y_plain(yd, Type::f32, Tag::nchw), x_plain(xd, Type::f32, Tag::nchw);
    r += reorder_ms(fpd.dst_desc(), y_plain) + reorder_ms(y_plain, dpd.diff_dst_desc());
    if (!first) r += reorder_ms(x_plain, fpd.src_desc()) + reorder_ms(dpd.diff_src_desc(), x_plain);
  }
  std::fprintf(stderr,
               "batch %4ld conv %2ld->%2ld %-4s %-5s fwd %7.2f  bwd_data %7.2f  bwd_weights %7.2f  sum %7.2f ms  "
               "reorders %6.2f ms  (%s / %s / %s)\n",
               N, C, K, bf16 ? "bf16" : "f32", any ? "any" : "plain", f, d, g, f + d + g, r,
               fpd.impl_info_str(), first ? "-" : dpd.impl_info_str(), wpd.impl_info_str());
  std::ostringstream o;
  o << "{\"batch\":" << N << ",\"in\":" << C << ",\"out\":" << K << ",\"precision\":\"" << (bf16 ? "bf16" : "f32")
    << "\",\"layout\":\"" << (any ? "any" : "plain") << "\",\"fwd_ms\":" << f << ",\"bwd_data_ms\":" << d
    << ",\"bwd_weights_ms\":" << g << ",\"reorder_ms\":" << r << ",\"impl\":\"" << fpd.impl_info_str() << "\"}";
  return o.str();
}

}  // namespace

int main(int argc, char** argv) try {
  Env env;
  std::vector<long> batches{64, 512};
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if ((f == "--batches" || f == "--reps") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (f == "--reps") {
        env.reps = std::max(1, std::atoi(v.c_str()));
        continue;
      }
      batches.clear();
      std::stringstream in(v);
      for (std::string item; std::getline(in, item, ',');) batches.push_back(std::max(1L, std::atol(item.c_str())));
    } else {
      std::fprintf(stderr, "usage: conv_layouts [--batches 64,512] [--reps 30]  (threads: OMP_NUM_THREADS)\n");
      return f == "-h" || f == "--help" ? 0 : 1;
    }
  }
  std::string json = "{\"cases\":[";
  bool sep = false;
  for (long n : batches)
    for (bool bf16 : {false, true})
      for (bool any : {false, true}) {
        for (const std::string& c : {run(env, n, 1, 28, 32, bf16, any, true), run(env, n, 32, 26, 64, bf16, any, false)}) {
          json += (sep ? "," : "") + c;
          sep = true;
        }
      }
  std::printf("%s]}\n", json.c_str());
  return 0;
} catch (const dnnl::error& e) {
  std::fprintf(stderr, "conv_layouts: oneDNN: %s\n", e.what());
  return 1;
}
