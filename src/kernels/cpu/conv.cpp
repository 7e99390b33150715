// Convolution and max pooling through oneDNN (see conv.hpp): primitives made once per shape and
// kept. A convolution runs in blocked-channel layouts: an operand in the device's layout (ImageLayout)
// is read and written where it is; one in NCHW is reordered from and to the caller's buffer around
// the call (bf16: converted by the same reorders); ReLU runs inside the forward pass (a post-op). A
// CPU without bf16 convolutions computes in f32 from then on. Pooling runs on its input's layout, its
// small output reordered to NCHW.
#include "kernels/cpu/conv.hpp"

#include <cstdio>
#include <dnnl.hpp>
#include <map>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;

// One operand of a primitive: the caller's memory (f32, NCHW / OIHW) and the layout and type the
// primitive chose (a blocked layout such as nChw16c, bf16), with the reorder between them when they
// differ (an input: the caller's into the primitive's; an output: back).
struct ConvOperand {
  memory::desc user, prim;
  bool same = true;
  dnnl::reorder reorder;
  int buffer = 0;  // which of the runtime's buffers holds the primitive's copy
};

// The three primitives of one convolution shape and input type, and their operands.
struct ConvPrimitives {
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights backward_weights;
  memory::desc bias;                  // [K] f32, the bias and its gradient
  ConvOperand fwd_x, fwd_w, fwd_y;        // forward
  ConvOperand bwd_dy, bwd_w, bwd_dx;      // the input gradient
  ConvOperand wgt_x, wgt_dy, wgt_dw;      // the weight gradient
};

// Max pooling in its input's layout; its output (and the output's gradient) reordered from and to
// the caller's NCHW when that layout is blocked.
struct PoolPrimitives {
  dnnl::pooling_forward::primitive_desc forward_pd;
  dnnl::pooling_forward forward;
  dnnl::pooling_backward backward;
  ConvOperand y, dy;
};

struct ConvRuntime {
  dnnl::engine& engine = onednn_engine();
  dnnl::stream& stream = onednn_stream();
  std::map<std::vector<int64_t>, ConvPrimitives> convs;
  std::map<std::vector<int64_t>, PoolPrimitives> pools;
  std::vector<uint8_t> buffers[3];   // operands in the primitives' layouts (grow-only)
  std::vector<float> grad_w, grad_b;  // a weight gradient before it is added to the caller's
  std::vector<float> zeros;           // the bias of a convolution without one
  bool bf16_unavailable = false;
};

ConvRuntime& conv_runtime() {
  static ConvRuntime rt;
  return rt;
}

memory mem(const memory::desc& d, const void* p) { return memory(d, conv_runtime().engine, const_cast<void*>(p)); }

ConvOperand operand(const memory::desc& user, const memory::desc& prim, bool input, int buffer) {
  ConvOperand o{user, prim, user == prim, {}, buffer};
  if (!o.same) {
    const dnnl::engine& e = conv_runtime().engine;
    o.reorder = input ? dnnl::reorder(dnnl::reorder::primitive_desc(e, user, e, prim))
                      : dnnl::reorder(dnnl::reorder::primitive_desc(e, prim, e, user));
  }
  return o;
}

// The memory the primitive reads for an input: the caller's, or it reordered (and converted to bf16).
memory input(const ConvOperand& o, const void* user) {
  ConvRuntime& rt = conv_runtime();
  if (o.same) return mem(o.user, user);
  std::vector<uint8_t>& buf = rt.buffers[o.buffer];
  if (buf.size() < o.prim.get_size()) buf.resize(o.prim.get_size());
  memory m = mem(o.prim, buf.data());
  memory u = mem(o.user, user);
  o.reorder.execute(rt.stream, u, m);
  return m;
}

// The memory the primitive writes an output into; finish() then brings it to the caller's layout.
memory output(const ConvOperand& o, void* user) {
  ConvRuntime& rt = conv_runtime();
  if (o.same) return mem(o.user, user);
  std::vector<uint8_t>& buf = rt.buffers[o.buffer];
  if (buf.size() < o.prim.get_size()) buf.resize(o.prim.get_size());
  return mem(o.prim, buf.data());
}
void finish(const ConvOperand& o, memory& m, void* user) {
  if (o.same) return;
  memory u = mem(o.user, user);
  o.reorder.execute(conv_runtime().stream, m, u);
}

memory::data_type input_type(bool bf16) { return bf16 ? memory::data_type::bf16 : memory::data_type::f32; }

// The device's layout of an activation with C channels (ImageLayout): channels blocked by the vector
// width when the block divides C (no padding: the bytes of NCHW), else NCHW itself.
Tag layout_tag(ImageLayout layout, int64_t C) {
  if (layout == ImageLayout::nchw) return Tag::nchw;
  const int64_t block = __builtin_cpu_supports("avx512f") ? 16 : 8;
  if (C % block) return Tag::nchw;
  return block == 16 ? Tag::nChw16c : Tag::nChw8c;
}

// Whether a convolution's primitive takes its operands in the device's layout as they are: when its
// input channels are blocked too, or few (oneDNN's first-convolution kernels read plain NCHW pixels
// into blocked outputs). Otherwise (say 6 input channels into 16) a blocked output beside a plain
// input would get oneDNN's reference kernels: its own pick runs, reordered from and to the caller's.
bool takes_device_layout(const ConvShape& s) {
  return layout_tag(ImageLayout::device, s.C) != Tag::nchw || s.C <= 4;
}

// The primitive's layout of an activation: the device's where the caller holds it so and it is
// blocked (read and written in place, f32; bf16 inputs converted in that layout), else oneDNN's pick
// (`any`, reordered from and to the caller's buffer).
memory::desc primitive_desc_of(const Dims& d, memory::data_type t, ImageLayout layout, int64_t C, bool as_is) {
  const Tag tag = layout_tag(layout, C);
  return memory::desc(d, t, tag == Tag::nchw || !as_is ? Tag::any : tag);
}

// The primitives are made with the NCHW operands' layouts left to oneDNN (`any`): it picks blocked
// layouts with fast kernels, where plain NCHW would get its slower gemm-based convolution.
ConvPrimitives& conv_primitives(const ConvShape& s, bool bf16) {
  ConvRuntime& rt = conv_runtime();
  const std::vector<int64_t> key{s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.pad, int64_t(bf16),
                                 int64_t(s.x_layout), int64_t(s.y_layout), int64_t(s.relu)};
  auto it = rt.convs.find(key);
  if (it != rt.convs.end()) return it->second;
  const auto in = input_type(bf16), f32 = memory::data_type::f32;
  const Dims xd{s.N, s.C, s.H, s.W}, wd{s.K, s.C, s.R, s.S}, yd{s.N, s.K, s.P(), s.Q()};
  const bool as_is = takes_device_layout(s);
  const memory::desc x = primitive_desc_of(xd, in, s.x_layout, s.C, as_is), w(wd, in, Tag::any),
                     y = primitive_desc_of(yd, f32, s.y_layout, s.K, as_is), b({s.K}, f32, Tag::x);
  const memory::desc dx = primitive_desc_of(xd, f32, s.x_layout, s.C, as_is), dw(wd, f32, Tag::any),
                     dy = primitive_desc_of(yd, in, s.y_layout, s.K, as_is);
  const memory::desc ux(xd, f32, layout_tag(s.x_layout, s.C)), uw(wd, f32, Tag::oihw),
      uy(yd, f32, layout_tag(s.y_layout, s.K));  // the caller's
  const Dims strides{s.stride, s.stride}, pad{s.pad, s.pad};
  const auto algo = dnnl::algorithm::convolution_direct;
  dnnl::primitive_attr attr;
  if (s.relu) {
    dnnl::post_ops relu;
    relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(relu);
  }
  const dnnl::convolution_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, algo, x, w, b, y, strides, pad, pad}, attr, rt.engine);
  const dnnl::convolution_backward_data::primitive_desc bwd({algo, dx, w, dy, strides, pad, pad}, rt.engine, fwd);
  const dnnl::convolution_backward_weights::primitive_desc wgt({algo, x, dw, b, dy, strides, pad, pad}, rt.engine, fwd);
  ConvPrimitives c{dnnl::convolution_forward(fwd), dnnl::convolution_backward_data(bwd),
                   dnnl::convolution_backward_weights(wgt), b,
                   operand(ux, fwd.src_desc(), true, 0), operand(uw, fwd.weights_desc(), true, 1),
                   operand(uy, fwd.dst_desc(), false, 2),
                   operand(uy, bwd.diff_dst_desc(), true, 0), operand(uw, bwd.weights_desc(), true, 1),
                   operand(ux, bwd.diff_src_desc(), false, 2),
                   operand(ux, wgt.src_desc(), true, 0), operand(uy, wgt.diff_dst_desc(), true, 1),
                   operand(uw, wgt.diff_weights_desc(), false, 2)};
  return rt.convs.emplace(key, std::move(c)).first->second;
}

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
  rethrow_onednn_error(e, "oneDNN's convolution (its kernels and scratch)");
}

DT_SIMD void add_into(float* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

PoolPrimitives& pool_primitives(const PoolShape& s) {
  ConvRuntime& rt = conv_runtime();
  const std::vector<int64_t> key{s.N, s.C, s.H, s.W, s.kernel, s.stride, int64_t(s.x_layout)};
  auto it = rt.pools.find(key);
  if (it != rt.pools.end()) return it->second;
  const auto f32 = memory::data_type::f32;
  const Tag tag = layout_tag(s.x_layout, s.C);
  const Dims yd{s.N, s.C, s.P(), s.Q()};
  const memory::desc x({s.N, s.C, s.H, s.W}, f32, tag), y(yd, f32, tag), uy(yd, f32, Tag::nchw);
  const Dims kernel{s.kernel, s.kernel}, strides{s.stride, s.stride}, pad{0, 0};
  const dnnl::pooling_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::pooling_max, x, y, strides, kernel, pad, pad}, rt.engine);
  const dnnl::pooling_backward::primitive_desc bwd({dnnl::algorithm::pooling_max, x, y, strides, kernel, pad, pad},
                                                   rt.engine, fwd);
  return rt.pools
      .emplace(key, PoolPrimitives{fwd, dnnl::pooling_forward(fwd), dnnl::pooling_backward(bwd),
                                   operand(uy, y, false, 2), operand(uy, y, true, 0)})
      .first->second;
}

}  // namespace

int64_t conv_scratch_bytes() {
  const ConvRuntime& rt = conv_runtime();
  size_t n = (rt.grad_w.capacity() + rt.grad_b.capacity() + rt.zeros.capacity()) * sizeof(float);
  for (const auto& b : rt.buffers) n += b.capacity();
  return int64_t(n);
}

void conv2d_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s, Precision p) {
  if (s.N == 0) return;
  run_conv(p, [&](bool bf16) {
    ConvRuntime& rt = conv_runtime();
    ConvPrimitives& c = conv_primitives(s, bf16);
    if (!bias && int64_t(rt.zeros.size()) < s.K) rt.zeros.assign(size_t(s.K), 0.0f);
    memory out = output(c.fwd_y, y);
    c.forward.execute(rt.stream, {{DNNL_ARG_SRC, input(c.fwd_x, x)},
                                  {DNNL_ARG_WEIGHTS, input(c.fwd_w, w)},
                                  {DNNL_ARG_BIAS, mem(c.bias, bias ? bias : rt.zeros.data())},
                                  {DNNL_ARG_DST, out}});
    finish(c.fwd_y, out, y);
    rt.stream.wait();
  });
}

void conv2d_backward_input(const float* dy, const float* w, float* dx, const ConvShape& s, Precision p) {
  if (s.N == 0) return;
  run_conv(p, [&](bool bf16) {
    ConvRuntime& rt = conv_runtime();
    ConvPrimitives& c = conv_primitives(s, bf16);
    memory out = output(c.bwd_dx, dx);
    c.backward_data.execute(rt.stream, {{DNNL_ARG_DIFF_DST, input(c.bwd_dy, dy)},
                                        {DNNL_ARG_WEIGHTS, input(c.bwd_w, w)},
                                        {DNNL_ARG_DIFF_SRC, out}});
    finish(c.bwd_dx, out, dx);
    rt.stream.wait();
  });
}

void conv2d_backward_weight(const float* x, const float* dy, float* dw, float* dbias, const ConvShape& s, Precision p) {
  if (s.N == 0) return;
  ConvRuntime& rt = conv_runtime();
  // oneDNN writes the gradients; the caller's accumulate over micro-batches, so they are added
  rt.grad_w.resize(size_t(s.weight_floats()));
  rt.grad_b.resize(size_t(s.K));
  run_conv(p, [&](bool bf16) {
    ConvPrimitives& c = conv_primitives(s, bf16);
    memory out = output(c.wgt_dw, rt.grad_w.data());
    c.backward_weights.execute(rt.stream, {{DNNL_ARG_SRC, input(c.wgt_x, x)},
                                           {DNNL_ARG_DIFF_DST, input(c.wgt_dy, dy)},
                                           {DNNL_ARG_DIFF_WEIGHTS, out},
                                           {DNNL_ARG_DIFF_BIAS, mem(c.bias, rt.grad_b.data())}});
    finish(c.wgt_dw, out, rt.grad_w.data());
    rt.stream.wait();
  });
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
  memory out = output(prim.y, y);
  prim.forward.execute(rt.stream, {{DNNL_ARG_SRC, mem(prim.forward_pd.src_desc(), x)},
                                   {DNNL_ARG_DST, out},
                                   {DNNL_ARG_WORKSPACE, mem(prim.forward_pd.workspace_desc(), workspace)}});
  finish(prim.y, out, y);
  rt.stream.wait();
} catch (const dnnl::error& e) {
  rethrow_onednn_error(e, "oneDNN's max pooling");
}

void maxpool_backward(const float*, const float*, const float* dy, float* dx, const void* workspace,
                      const PoolShape& s) try {
  if (s.N == 0) return;
  ConvRuntime& rt = conv_runtime();
  PoolPrimitives& prim = pool_primitives(s);
  prim.backward.execute(rt.stream, {{DNNL_ARG_DIFF_DST, input(prim.dy, dy)},
                                    {DNNL_ARG_DIFF_SRC, mem(prim.forward_pd.src_desc(), dx)},
                                    {DNNL_ARG_WORKSPACE, mem(prim.forward_pd.workspace_desc(), workspace)}});
  rt.stream.wait();
} catch (const dnnl::error& e) {
  rethrow_onednn_error(e, "oneDNN's max pooling");
}

}  // namespace dtrain
