// Convolution and max pooling through oneDNN (see conv.hpp): primitives made once per shape and
// kept; plain NCHW / OIHW memory, so the activations are the model's own buffers (no reorders). bf16
// rounds the convolution's inputs to bf16 in reused buffers; a CPU without bf16 convolutions
// computes in f32 from then on.
#include "kernels/cpu/conv.hpp"

#include <cstdio>
#include <dnnl.hpp>
#include <map>
#include <vector>

#include "core/error.hpp"
#include "core/limits.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;

// The three primitives of one convolution shape and input type.
struct ConvPrimitives {
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights backward_weights;
};

struct PoolPrimitives {
  dnnl::pooling_forward::primitive_desc forward_pd;
  dnnl::pooling_forward forward;
  dnnl::pooling_backward backward;
};

struct ConvRuntime {
  dnnl::engine& engine = onednn_engine();
  dnnl::stream& stream = onednn_stream();
  std::map<std::vector<int64_t>, ConvPrimitives> convs;
  std::map<std::vector<int64_t>, PoolPrimitives> pools;
  std::vector<uint16_t> bf16_a, bf16_b;  // the bf16 copies of a call's two inputs
  std::vector<float> grad_w, grad_b;     // a weight gradient before it is added to the caller's
  std::vector<float> zeros;              // the bias of a convolution without one
  bool bf16_unavailable = false;
};

ConvRuntime& conv_runtime() {
  static ConvRuntime rt;
  return rt;
}

memory::data_type input_type(bool bf16) { return bf16 ? memory::data_type::bf16 : memory::data_type::f32; }

struct ConvDescs {
  memory::desc x, w, b, y;     // x and w in the input type; b and y in f32
  memory::desc dx, dw, db, dy;  // backward: dy in the input type, dx, dw, db in f32
  Dims strides, pad;
};

ConvDescs conv_descs(const ConvShape& s, bool bf16) {
  const auto in = input_type(bf16), f32 = memory::data_type::f32;
  const Dims x{s.N, s.C, s.H, s.W}, w{s.K, s.C, s.R, s.S}, b{s.K}, y{s.N, s.K, s.P(), s.Q()};
  return {memory::desc(x, in, Tag::nchw),  memory::desc(w, in, Tag::oihw), memory::desc(b, f32, Tag::x),
          memory::desc(y, f32, Tag::nchw), memory::desc(x, f32, Tag::nchw), memory::desc(w, f32, Tag::oihw),
          memory::desc(b, f32, Tag::x),    memory::desc(y, in, Tag::nchw),  Dims{s.stride, s.stride},
          Dims{s.pad, s.pad}};
}

ConvPrimitives& conv_primitives(const ConvShape& s, bool bf16) {
  ConvRuntime& rt = conv_runtime();
  const std::vector<int64_t> key{s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.pad, int64_t(bf16)};
  auto it = rt.convs.find(key);
  if (it != rt.convs.end()) return it->second;
  const ConvDescs d = conv_descs(s, bf16);
  const auto algo = dnnl::algorithm::convolution_direct;
  const dnnl::convolution_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, algo, d.x, d.w, d.b, d.y, d.strides, d.pad, d.pad}, rt.engine);
  const dnnl::convolution_backward_data::primitive_desc bwd_data({algo, d.dx, d.w, d.dy, d.strides, d.pad, d.pad},
                                                                 rt.engine, fwd);
  const dnnl::convolution_backward_weights::primitive_desc bwd_weights(
      {algo, d.x, d.dw, d.db, d.dy, d.strides, d.pad, d.pad}, rt.engine, fwd);
  return rt.convs
      .emplace(key, ConvPrimitives{dnnl::convolution_forward(fwd), dnnl::convolution_backward_data(bwd_data),
                                   dnnl::convolution_backward_weights(bwd_weights)})
      .first->second;
}

memory mem(const memory::desc& d, const void* p) { return memory(d, conv_runtime().engine, const_cast<void*>(p)); }

// Runs `call(bf16)` in the precision asked for; a CPU (or oneDNN build) without bf16 convolutions
// computes in f32 from then on, said once. oneDNN's out-of-memory becomes AllocationFailed.
template <class Call>
void run_conv(Precision p, Call&& call) try {
  ConvRuntime& rt = conv_runtime();
  const bool bf16 = p == Precision::bf16 && !rt.bf16_unavailable;
  if (!bf16) return call(false);
  try {
    call(true);
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory) throw;
    std::fprintf(stderr, "dtrain: warning: this CPU has no bf16 convolution support; computing it in f32\n");
    rt.bf16_unavailable = true;
    call(false);
  }
} catch (const dnnl::error& e) {
  if (e.status == dnnl_out_of_memory) throw AllocationFailed("oneDNN's convolution (its kernels and scratch)");
  throw;
}

DT_SIMD void add_into(float* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

PoolPrimitives& pool_primitives(const PoolShape& s) {
  ConvRuntime& rt = conv_runtime();
  const std::vector<int64_t> key{s.N, s.C, s.H, s.W, s.kernel, s.stride};
  auto it = rt.pools.find(key);
  if (it != rt.pools.end()) return it->second;
  const auto f32 = memory::data_type::f32;
  const memory::desc x({s.N, s.C, s.H, s.W}, f32, Tag::nchw), y({s.N, s.C, s.P(), s.Q()}, f32, Tag::nchw);
  const Dims kernel{s.kernel, s.kernel}, strides{s.stride, s.stride}, pad{0, 0};
  const dnnl::pooling_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::pooling_max, x, y, strides, kernel, pad, pad}, rt.engine);
  const dnnl::pooling_backward::primitive_desc bwd({dnnl::algorithm::pooling_max, x, y, strides, kernel, pad, pad},
                                                   rt.engine, fwd);
  return rt.pools.emplace(key, PoolPrimitives{fwd, dnnl::pooling_forward(fwd), dnnl::pooling_backward(bwd)})
      .first->second;
}

}  // namespace

void conv2d_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s, Precision p) {
  if (s.N == 0) return;
  run_conv(p, [&](bool bf16) {
    ConvRuntime& rt = conv_runtime();
    const ConvDescs d = conv_descs(s, bf16);
    const void* xi = bf16 ? static_cast<const void*>(round_to_bf16(x, s.input_floats(), rt.bf16_a)) : x;
    const void* wi = bf16 ? static_cast<const void*>(round_to_bf16(w, s.weight_floats(), rt.bf16_b)) : w;
    std::unordered_map<int, memory> io{
        {DNNL_ARG_SRC, mem(d.x, xi)}, {DNNL_ARG_WEIGHTS, mem(d.w, wi)}, {DNNL_ARG_DST, mem(d.y, y)}};
    if (!bias && int64_t(rt.zeros.size()) < s.K) rt.zeros.assign(size_t(s.K), 0.0f);
    io.emplace(DNNL_ARG_BIAS, mem(d.b, bias ? bias : rt.zeros.data()));
    conv_primitives(s, bf16).forward.execute(rt.stream, io);
    rt.stream.wait();
  });
}

void conv2d_backward_input(const float* dy, const float* w, float* dx, const ConvShape& s, Precision p) {
  if (s.N == 0) return;
  run_conv(p, [&](bool bf16) {
    ConvRuntime& rt = conv_runtime();
    const ConvDescs d = conv_descs(s, bf16);
    const void* dyi = bf16 ? static_cast<const void*>(round_to_bf16(dy, s.output_floats(), rt.bf16_a)) : dy;
    const void* wi = bf16 ? static_cast<const void*>(round_to_bf16(w, s.weight_floats(), rt.bf16_b)) : w;
    conv_primitives(s, bf16).backward_data.execute(
        rt.stream, {{DNNL_ARG_DIFF_DST, mem(d.dy, dyi)}, {DNNL_ARG_WEIGHTS, mem(d.w, wi)}, {DNNL_ARG_DIFF_SRC, mem(d.dx, dx)}});
    rt.stream.wait();
  });
}

void conv2d_backward_weight(const float* x, const float* dy, float* dw, float* dbias, const ConvShape& s, Precision p) {
  if (s.N == 0) return;
  run_conv(p, [&](bool bf16) {
    ConvRuntime& rt = conv_runtime();
    const ConvDescs d = conv_descs(s, bf16);
    const void* xi = bf16 ? static_cast<const void*>(round_to_bf16(x, s.input_floats(), rt.bf16_a)) : x;
    const void* dyi = bf16 ? static_cast<const void*>(round_to_bf16(dy, s.output_floats(), rt.bf16_b)) : dy;
    // oneDNN writes the gradients; the caller's accumulate over micro-batches, so they are added
    rt.grad_w.resize(size_t(s.weight_floats()));
    rt.grad_b.resize(size_t(s.K));
    conv_primitives(s, bf16).backward_weights.execute(rt.stream, {{DNNL_ARG_SRC, mem(d.x, xi)},
                                                                  {DNNL_ARG_DIFF_DST, mem(d.dy, dyi)},
                                                                  {DNNL_ARG_DIFF_WEIGHTS, mem(d.dw, rt.grad_w.data())},
                                                                  {DNNL_ARG_DIFF_BIAS, mem(d.db, rt.grad_b.data())}});
    rt.stream.wait();
  });
  ConvRuntime& rt = conv_runtime();
  add_into(dw, rt.grad_w.data(), s.weight_floats());
  if (dbias) add_into(dbias, rt.grad_b.data(), s.K);
}

size_t maxpool_workspace_bytes(const PoolShape& s) {
  if (s.N == 0) return 0;
  return pool_primitives(s).forward_pd.workspace_desc().get_size();
}

void maxpool_forward(const float* x, float* y, void* workspace, const PoolShape& s) try {
  if (s.N == 0) return;
  ConvRuntime& rt = conv_runtime();
  PoolPrimitives& prim = pool_primitives(s);
  prim.forward.execute(rt.stream, {{DNNL_ARG_SRC, mem(prim.forward_pd.src_desc(), x)},
                                   {DNNL_ARG_DST, mem(prim.forward_pd.dst_desc(), y)},
                                   {DNNL_ARG_WORKSPACE, mem(prim.forward_pd.workspace_desc(), workspace)}});
  rt.stream.wait();
} catch (const dnnl::error& e) {
  if (e.status == dnnl_out_of_memory) throw AllocationFailed("oneDNN's max pooling");
  throw;
}

void maxpool_backward(const float*, const float*, const float* dy, float* dx, const void* workspace,
                      const PoolShape& s) try {
  if (s.N == 0) return;
  ConvRuntime& rt = conv_runtime();
  PoolPrimitives& prim = pool_primitives(s);
  prim.backward.execute(rt.stream, {{DNNL_ARG_DIFF_DST, mem(prim.forward_pd.dst_desc(), dy)},
                                    {DNNL_ARG_DIFF_SRC, mem(prim.forward_pd.src_desc(), dx)},
                                    {DNNL_ARG_WORKSPACE, mem(prim.forward_pd.workspace_desc(), workspace)}});
  rt.stream.wait();
} catch (const dnnl::error& e) {
  if (e.status == dnnl_out_of_memory) throw AllocationFailed("oneDNN's max pooling");
  throw;
}

}  // namespace dtrain
