// oneDNN matmul with a primitive cache keyed by shape, layout and precision; f32 inputs of bf16 products
// are converted into reused scratch buffers (mixed precision: bf16 multiply, f32 accumulate), bf16
// inputs (activations kept in bf16) read as they are, or given already converted by a caller that uses
// one conversion for several products.
#include "kernels/cpu/matmul.hpp"

#include <cstdio>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <vector>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "kernels/cpu/onednn.hpp"

namespace dtrain {
namespace {

using dnnl::memory;

struct MatmulRuntime {
  dnnl::engine& engine = onednn_engine();
  dnnl::stream& stream = onednn_stream();
  std::map<std::vector<int64_t>, dnnl::matmul> cache;  // by Problem::key()
  std::vector<uint16_t> scratch_a, scratch_b, scratch_c;  // c: only matmul_bf16_copy's
  std::vector<float> wide_a, wide_b;  // bf16 operands widened, where bf16 products are not available
  bool bf16_unavailable = false;
  bool bf16_probed = false;
};

MatmulRuntime& runtime() {
  static MatmulRuntime rt;
  return rt;
}

// One matmul as oneDNN sees it: operand layouts, element type of A and B, and the epilogue.
struct Problem {
  std::vector<int64_t> a_dims, a_strides, b_dims, b_strides, c_dims, c_strides;
  bool bf16 = false, bias = false, accumulate = false, relu = false;
  float alpha = 1.0f;

  memory::desc desc(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, bool input) const {
    return memory::desc(dims, input && bf16 ? memory::data_type::bf16 : memory::data_type::f32, strides);
  }
  memory::desc bias_desc() const {
    std::vector<int64_t> dims(c_dims.size(), 1), strides(c_dims.size(), c_dims.back());
    dims.back() = c_dims.back();
    strides.back() = 1;
    return memory::desc(dims, memory::data_type::f32, strides);
  }
  std::vector<int64_t> key() const {
    std::vector<int64_t> k;
    for (const auto* v : {&a_dims, &a_strides, &b_dims, &b_strides, &c_dims, &c_strides}) {
      k.push_back(int64_t(v->size()));
      k.insert(k.end(), v->begin(), v->end());
    }
    int32_t alpha_bits;
    std::memcpy(&alpha_bits, &alpha, 4);
    k.insert(k.end(), {int64_t(bf16), int64_t(bias), int64_t(accumulate), int64_t(relu), alpha_bits});
    return k;
  }
  dnnl::matmul make(const dnnl::engine& engine) const {
    dnnl::primitive_attr attr;
    dnnl::post_ops po;
    if (accumulate) po.append_sum(1.0f);
    if (relu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    if (accumulate || relu) attr.set_post_ops(po);
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    const auto a = desc(a_dims, a_strides, true), b = desc(b_dims, b_strides, true), c = desc(c_dims, c_strides, false);
    auto d = bias ? dnnl::matmul::desc(a, b, bias_desc(), c) : dnnl::matmul::desc(a, b, c);
    return dnnl::matmul(dnnl::matmul::primitive_desc(d, attr, engine));
  }
};

// Runs the problem on A, B (already in the problem's input type), bias and C.
void run(const Problem& p, const void* A, const void* B, const float* bias, float* C) try {
  MatmulRuntime& rt = runtime();
  const auto key = p.key();
  auto it = rt.cache.find(key);
  if (it == rt.cache.end()) it = rt.cache.emplace(key, p.make(rt.engine)).first;
  std::unordered_map<int, memory> io{
      {DNNL_ARG_SRC, memory(p.desc(p.a_dims, p.a_strides, true), rt.engine, const_cast<void*>(A))},
      {DNNL_ARG_WEIGHTS, memory(p.desc(p.b_dims, p.b_strides, true), rt.engine, const_cast<void*>(B))},
      {DNNL_ARG_DST, memory(p.desc(p.c_dims, p.c_strides, false), rt.engine, C)}};
  if (p.bias) io.emplace(DNNL_ARG_BIAS, memory(p.bias_desc(), rt.engine, const_cast<float*>(bias)));
  it->second.execute(rt.stream, io);
  rt.stream.wait();
} catch (const dnnl::error& e) {
  rethrow_onednn_error(e, "oneDNN's matrix product (its kernels and scratch)");
}

// Strides of a logical [rows, cols] matrix, stored row-major or (trans) as its transpose.
std::vector<int64_t> strides_2d(int64_t rows, int64_t cols, bool trans) {
  return trans ? std::vector<int64_t>{1, rows} : std::vector<int64_t>{cols, 1};
}

// A row-major product of the arguments, its operands f32 or bf16.
Problem problem_of(const MatmulArgs& a, bool bf16) {
  return Problem{{a.M, a.K}, strides_2d(a.M, a.K, a.trans_a), {a.K, a.N}, strides_2d(a.K, a.N, a.trans_b),
                 {a.M, a.N}, strides_2d(a.M, a.N, false),     bf16,       a.bias != nullptr,
                 a.accumulate, a.relu};
}

// Whether this CPU (and oneDNN build) runs bf16 matmuls: a small one is made once to see.
bool bf16_matmul_available() {
  MatmulRuntime& rt = runtime();
  if (rt.bf16_probed) return !rt.bf16_unavailable;
  rt.bf16_probed = true;
  try {
    problem_of({16, 16, 16}, true).make(rt.engine);
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory) rethrow_onednn_error(e, "oneDNN's matrix product (its kernels and scratch)");
    rt.bf16_unavailable = true;
  }
  return !rt.bf16_unavailable;
}

// The buffer a bf16 copy of that kind goes into.
std::vector<uint16_t>& copy_buffer(Bf16Copy which) {
  MatmulRuntime& rt = runtime();
  return which == Bf16Copy::a ? rt.scratch_a : which == Bf16Copy::b ? rt.scratch_b : rt.scratch_c;
}
}  // namespace

bool matmul_bf16_available() { return bf16_matmul_available(); }

bool bf16_products_for(Precision p) {
  if (p != Precision::bf16) return false;
  if (bf16_matmul_available()) return true;
  static bool said = false;
  if (!said) std::fprintf(stderr, "dtrain: warning: this CPU has no bf16 matmul support; computing in f32\n");
  said = true;
  return false;
}

int64_t matmul_scratch_bytes() {
  const MatmulRuntime& rt = runtime();
  return int64_t((rt.scratch_a.capacity() + rt.scratch_b.capacity() + rt.scratch_c.capacity()) * sizeof(uint16_t) +
                 (rt.wide_a.capacity() + rt.wide_b.capacity()) * sizeof(float));
}


bool matmul_copies_to_bf16(const MatmulArgs& a, bool bf16_products) {
  return a.M != 0 && a.N != 0 && a.precision == Precision::bf16 && bf16_products;
}
bool matmul_copies_to_bf16(const MatmulArgs& a) { return matmul_copies_to_bf16(a, bf16_products_for(a.precision)); }

const uint16_t* matmul_bf16_copy(Bf16Copy which, const float* src, int64_t n) {
  return round_to_bf16(src, n, copy_buffer(which));
}

uint16_t* matmul_bf16_buffer(Bf16Copy which, int64_t n) { return bf16_buffer(copy_buffer(which), n); }

void matmul_bf16(const uint16_t* A, const uint16_t* B, float* C, const MatmulArgs& a) {
  DT_ASSERT(!(a.accumulate && (a.bias || a.relu)));
  if (a.M == 0 || a.N == 0) return;
  DT_ASSERT(matmul_copies_to_bf16(a));
  run(problem_of(a, true), A, B, a.bias, C);
}

const uint16_t* bf16_operand(Operand x, Bf16Copy which, int64_t n) {
  return x.bf16 ? x.b16() : matmul_bf16_copy(which, x.f32(), n);
}

namespace {

// n elements of an operand as an f32 product reads them: as stored, or (bf16, where bf16 products are not available)
// widened into `wide`, grown to exactly n when smaller (the planner's scratch model counts n).
const float* f32_operand(Operand x, std::vector<float>& wide, int64_t n) {
  if (!x.bf16) return x.f32();
  if (wide.size() < size_t(n)) {
    wide.clear();
    wide.shrink_to_fit();
    wide.resize(size_t(n));
  }
  const uint16_t* in = x.b16();
  float* out = wide.data();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = to_f32(bf16{in[i]});
  return out;
}
}  // namespace

void matmul(Operand A, Operand B, float* C, const MatmulArgs& args) {
  const MatmulArgs a = matmul_args_for(args, A.bf16, B.bf16);
  DT_ASSERT(!(a.accumulate && (a.bias || a.relu)));
  if (a.M == 0 || a.N == 0) return;
  MatmulRuntime& rt = runtime();
  if (!matmul_copies_to_bf16(a))
    return run(problem_of(a, false), f32_operand(A, rt.wide_a, a.M * a.K), f32_operand(B, rt.wide_b, a.K * a.N), a.bias,
               C);
  run(problem_of(a, true), bf16_operand(A, Bf16Copy::a, a.M * a.K), bf16_operand(B, Bf16Copy::b, a.K * a.N), a.bias, C);
}

void linear_backward(Operand x, Operand dy, Operand W, float* dW, float* dx, int64_t rows, int64_t in,
                     int64_t out, bool accumulate_dx, Precision p) {
  const MatmulArgs wa = matmul_args_for(linear_backward_weight_args(rows, in, out, p), dy.bf16, x.bf16),
                   ia = matmul_args_for(linear_backward_input_args(rows, in, out, accumulate_dx, p), dy.bf16, W.bf16);
  if (!matmul_copies_to_bf16(wa) || !matmul_copies_to_bf16(ia)) {
    matmul(dy, x, dW, wa);
    matmul(dy, W, dx, ia);
    return;
  }
  const uint16_t* g = bf16_operand(dy, Bf16Copy::a, rows * out);
  matmul_bf16(g, bf16_operand(x, Bf16Copy::b, rows * in), dW, wa);
  matmul_bf16(g, bf16_operand(W, Bf16Copy::b, out * in), dx, ia);
}

void matmul_batched(Operand A, Strided4 sa, Operand B, Strided4 sb, float* C, Strided4 sc, int64_t d0, int64_t d1,
                    int64_t M, int64_t N, int64_t K, float alpha, bool accumulate) {
  if (d0 * d1 * M * N == 0) return;
  DT_ASSERT(A.bf16 == B.bf16 && (!A.bf16 || bf16_matmul_available()));
  auto strides = [](const Strided4& s) { return std::vector<int64_t>(s.stride, s.stride + 4); };
  Problem p{{d0, d1, M, K}, strides(sa), {d0, d1, K, N}, strides(sb), {d0, d1, M, N}, strides(sc)};
  p.bf16 = A.bf16;
  p.alpha = alpha;
  p.accumulate = accumulate;
  run(p, A.data, B.data, nullptr, C);
}

}  // namespace dtrain
