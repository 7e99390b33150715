// oneDNN matmul with a primitive cache keyed by shape, layout and precision; bf16 inputs are
// converted from f32 into reused scratch buffers (mixed precision: bf16 multiply, f32 accumulate).
#include "kernels/cpu/matmul.hpp"

#include <cstdio>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <tuple>
#include <vector>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {
namespace {

using dnnl::memory;
using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool, int>;

struct Runtime {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, dnnl::matmul> cache;
  std::map<std::vector<int64_t>, dnnl::matmul> batched_cache;
  std::vector<uint16_t> scratch_a, scratch_b;
  bool bf16_unavailable = false;
};

Runtime& runtime() {
  static Runtime rt;
  return rt;
}

DT_SIMD void convert_to_bf16(const float* src, int64_t n, std::vector<uint16_t>& dst) {
  if (int64_t(dst.size()) < n) dst.resize(n);
  uint16_t* out = dst.data();
  const uint32_t* in = reinterpret_cast<const uint32_t*>(src);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = in[i];
    out[i] = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

memory::desc desc_for(int64_t rows, int64_t cols, bool trans, memory::data_type dt) {
  // logical [rows, cols]; stored transposed means physical [cols, rows]
  if (trans) return memory::desc({rows, cols}, dt, {1, rows});
  return memory::desc({rows, cols}, dt, {cols, 1});
}

}  // namespace

bool cpu_has_native_bf16() {
  return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
}

void matmul(const float* A, const float* B, float* C, const MatmulArgs& args) {
  DT_ASSERT(!(args.accumulate && args.bias));
  if (args.M == 0 || args.N == 0) return;
  Runtime& rt = runtime();
  MatmulArgs a = args;
  if (a.precision == Precision::bf16 && rt.bf16_unavailable) a.precision = Precision::f32;
  const bool bf = a.precision == Precision::bf16;
  const auto in_dt = bf ? memory::data_type::bf16 : memory::data_type::f32;
  Key key{a.M, a.N, a.K, a.trans_a, a.trans_b, a.accumulate, a.bias != nullptr, int(a.precision)};
  auto it = rt.cache.find(key);
  auto a_md = desc_for(a.M, a.K, a.trans_a, in_dt);
  auto b_md = desc_for(a.K, a.N, a.trans_b, in_dt);
  auto c_md = desc_for(a.M, a.N, false, memory::data_type::f32);
  auto bias_md = memory::desc({1, a.N}, memory::data_type::f32, {a.N, 1});
  if (it == rt.cache.end()) {
    dnnl::primitive_attr attr;
    if (a.accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    auto d = a.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md);
    try {
      dnnl::matmul::primitive_desc pd(d, attr, rt.engine);
      it = rt.cache.emplace(key, dnnl::matmul(pd)).first;
    } catch (const dnnl::error&) {
      if (!bf) throw;
      // This CPU (or oneDNN build) has no bf16 matmul: compute in f32 from now on, and say so once.
      std::fprintf(stderr, "dtrain: warning: this CPU has no bf16 matmul support; computing in f32\n");
      rt.bf16_unavailable = true;
      matmul(A, B, C, args);
      return;
    }
  }
  void* pa = const_cast<float*>(A);
  void* pb = const_cast<float*>(B);
  if (bf) {
    convert_to_bf16(A, a.M * a.K, rt.scratch_a);
    convert_to_bf16(B, a.K * a.N, rt.scratch_b);
    pa = rt.scratch_a.data();
    pb = rt.scratch_b.data();
  }
  std::unordered_map<int, memory> io{{DNNL_ARG_SRC, memory(a_md, rt.engine, pa)},
                                       {DNNL_ARG_WEIGHTS, memory(b_md, rt.engine, pb)},
                                       {DNNL_ARG_DST, memory(c_md, rt.engine, C)}};
  if (a.bias) io.emplace(DNNL_ARG_BIAS, memory(bias_md, rt.engine, const_cast<float*>(a.bias)));
  it->second.execute(rt.stream, io);
  rt.stream.wait();
}

void matmul_batched(const float* A, Strided4 sa, const float* B, Strided4 sb, float* C, Strided4 sc, int64_t d0,
                    int64_t d1, int64_t M, int64_t N, int64_t K, float alpha) {
  if (d0 * d1 * M * N == 0) return;
  Runtime& rt = runtime();
  auto md = [](int64_t r, int64_t c, int64_t b0, int64_t b1, const Strided4& st) {
    return memory::desc({b0, b1, r, c}, memory::data_type::f32, {st.stride[0], st.stride[1], st.stride[2], st.stride[3]});
  };
  const auto a_md = md(M, K, d0, d1, sa), b_md = md(K, N, d0, d1, sb), c_md = md(M, N, d0, d1, sc);
  std::vector<int64_t> key{d0, d1, M, N, K};
  for (const Strided4* st : {&sa, &sb, &sc}) key.insert(key.end(), st->stride, st->stride + 4);
  int32_t alpha_bits;
  std::memcpy(&alpha_bits, &alpha, 4);
  key.push_back(alpha_bits);
  auto it = rt.batched_cache.find(key);
  if (it == rt.batched_cache.end()) {
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, rt.engine);
    it = rt.batched_cache.emplace(key, dnnl::matmul(pd)).first;
  }
  it->second.execute(rt.stream, {{DNNL_ARG_SRC, memory(a_md, rt.engine, const_cast<float*>(A))},
                                 {DNNL_ARG_WEIGHTS, memory(b_md, rt.engine, const_cast<float*>(B))},
                                 {DNNL_ARG_DST, memory(c_md, rt.engine, C)}});
  rt.stream.wait();
}

}  // namespace dtrain
