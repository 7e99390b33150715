// The CPU as a ComputeDevice (kernels/device.hpp): host memory, copies as memcpy, and the CPU kernels
// beside it (timed per kernel family under DTRAIN_PROFILE=1); cpu_device() and cpu_has_native_bf16(),
// declared by the contract, are defined here.
#include <chrono>
#include <cstring>
#include <omp.h>

#include "core/bf16.hpp"
#include "kernels/cpu/activation.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/attention_blocks.hpp"
#include "kernels/cpu/conv.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/moe.hpp"
#include "kernels/cpu/op_profile.hpp"
#include "kernels/cpu/optimizer.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "kernels/device.hpp"

namespace dtrain {

namespace {

// Times the call it opens (DTRAIN_PROFILE=1): the host's time of each kernel family.
#define DT_CPU_OP(...) HostOpProfile::Scope op_profile_scope_(prof_, __VA_ARGS__)

class CpuDevice final : public ComputeDevice {
 public:
  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string describe() const override {
    const int n = omp_get_max_threads();
    return "cpu (" + std::to_string(n) + (n == 1 ? " thread)" : " threads)");
  }
  void* allocate_zeroed(size_t bytes) override { return host_memory().allocate_zeroed(bytes); }
  void release(void* p) override { host_memory().release(p); }
  bool host_accessible() const override { return true; }
  size_t kernel_scratch_bytes() const override {
    return size_t(scratch_bytes() + matmul_scratch_bytes() + conv_scratch_bytes());
  }
  void zero(void* p, size_t bytes) override {
    DT_CPU_OP("zero");
    std::memset(p, 0, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    DT_CPU_OP("copy");
    if (dst != src) std::memcpy(dst, src, bytes);
  }
  void upload(void* dst, const void* host, size_t bytes) override {
    DT_CPU_OP("upload");
    if (dst != host) std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, size_t bytes) override {
    if (host != src) std::memcpy(host, src, bytes);
  }
  void synchronize() override {}
  void timer_start() override { mark_ = std::chrono::steady_clock::now(); }
  std::vector<OpTime> op_times() override { return prof_.take(); }
  double timer_seconds() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - mark_).count();
  }

  bool bf16_products() const override { return matmul_bf16_available(); }
  void matmul(Operand A, Operand B, float* C, const MatmulArgs& a) override {
    DT_CPU_OP("matmul", matmul_flops(a));
    dtrain::matmul(A, B, C, a);
  }
  void linear_backward(Operand x, Operand dy, Operand W, float* dW, float* dx, int64_t rows, int64_t in,
                       int64_t out, bool accumulate_dx, Precision p) override {
    DT_CPU_OP("matmul", 2.0 * matmul_flops(linear_backward_input_args(rows, in, out, accumulate_dx, p)));
    dtrain::linear_backward(x, dy, W, dW, dx, rows, in, out, accumulate_dx, p);
  }
  void colsum_accumulate(Operand x, float* out, int64_t rows, int64_t cols) override {
    DT_CPU_OP("colsum_accumulate");
    dtrain::colsum_accumulate(x, out, rows, cols);
  }
  void add(const float* a, const float* b, float* out, int64_t n) override {
    DT_CPU_OP("add");
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  }
  void scale(float* x, float f, int64_t n) override {
    DT_CPU_OP("scale");
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) x[i] *= f;
  }
  void to_bf16(const float* x, uint16_t* y, int64_t n) override {
    DT_CPU_OP("to_bf16");
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = dtrain::to_bf16(x[i]).bits;
  }
  void from_bf16(const uint16_t* x, float* y, int64_t n) override {
    DT_CPU_OP("from_bf16");
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = to_f32(bf16{x[i]});
  }
  void sumsq(const float* x, int64_t n, double* out) override {
    DT_CPU_OP("sumsq");
    *out += sumsq_deterministic(x, n);
  }
  void layernorm_forward(const float* x, const float* g, const float* b, float* y, float* mean, float* rstd,
                         int64_t rows, int64_t dim, float eps) override {
    DT_CPU_OP("layernorm_forward");
    dtrain::layernorm_forward(x, g, b, y, mean, rstd, rows, dim, eps);
  }
  void layernorm_backward(const float* dy, const float* x, const float* g, const float* mean, const float* rstd,
                          float* dx, float* dg, float* db, int64_t rows, int64_t dim, bool acc) override {
    DT_CPU_OP("layernorm_backward");
    dtrain::layernorm_backward(dy, x, g, mean, rstd, dx, dg, db, rows, dim, acc);
  }
  void rmsnorm_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t dim,
                       float eps) override {
    DT_CPU_OP("rmsnorm_forward");
    dtrain::rmsnorm_forward(x, w, y, rstd, rows, dim, eps);
  }
  void rmsnorm_backward(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                        int64_t rows, int64_t dim, bool acc) override {
    DT_CPU_OP("rmsnorm_backward");
    dtrain::rmsnorm_backward(dy, x, w, rstd, dx, dw, rows, dim, acc);
  }
  void attention_forward(Operand qkv, float* out, ActBuffer probs, const AttentionShape& s,
                         const DropoutSpec& drop) override {
    DT_CPU_OP("attention_forward", s.flops(false));
    dtrain::attention_forward(qkv, out, probs, s, drop);
  }
  void attention_backward(const float* dout, Operand qkv, Operand probs, float* dqkv,
                          const AttentionShape& s, const DropoutSpec& drop) override {
    DT_CPU_OP("attention_backward", s.flops(true));
    dtrain::attention_backward(dout, qkv, probs, dqkv, s, drop);
  }
  void kv_block_pack(const float* qkv, float* kv, const AttentionShape& s) override {
    DT_CPU_OP("kv_block_pack");
    dtrain::kv_block_pack(qkv, kv, s);
  }
  void kv_block_unpack(const float* dkv, float* dqkv, const AttentionShape& s) override {
    DT_CPU_OP("kv_block_unpack");
    dtrain::kv_block_unpack(dkv, dqkv, s);
  }
  void attention_block_forward(const float* qkv, const float* kv, const SequenceShard& keys, float* out,
                               float* stats, const AttentionBlocks& a, const DropoutSpec& drop, bool first) override {
    DT_CPU_OP("attention_block_forward");
    dtrain::attention_block_forward(qkv, kv, keys, out, stats, a, drop, first);
  }
  void attention_blocks_finish(float* out, const float* stats, float* lse, const AttentionBlocks& a) override {
    DT_CPU_OP("attention_blocks_finish");
    dtrain::attention_blocks_finish(out, stats, lse, a);
  }
  void attention_blocks_delta(const float* dout, const float* out, float* delta, const AttentionBlocks& a) override {
    DT_CPU_OP("attention_blocks_delta");
    dtrain::attention_blocks_delta(dout, out, delta, a);
  }
  void attention_block_backward(const float* dout, const float* qkv, const float* kv, const SequenceShard& keys,
                                const float* lse, const float* delta, float* dqkv, float* dkv,
                                const AttentionBlocks& a, const DropoutSpec& drop, bool first) override {
    DT_CPU_OP("attention_block_backward");
    dtrain::attention_block_backward(dout, qkv, kv, keys, lse, delta, dqkv, dkv, a, drop, first);
  }
  void moe_route(const float* logits, float* scores, int32_t* chosen, float* weights, int64_t* counts,
                 int64_t* offsets, int32_t* row_of, int32_t* pos, const MoeRouting& r) override {
    DT_CPU_OP("moe_route");
    dtrain::moe_route(logits, scores, chosen, weights, counts, offsets, row_of, pos, r);
  }
  void moe_gather(const float* x, const int32_t* row_of, float* grouped, int64_t n, int64_t d) override {
    DT_CPU_OP("moe_gather");
    dtrain::moe_gather(x, row_of, grouped, n, d);
  }
  void moe_combine(const float* grouped, const int32_t* pos, const float* weights, float* y, const MoeRouting& r,
                   int64_t d) override {
    DT_CPU_OP("moe_combine");
    dtrain::moe_combine(grouped, pos, weights, y, r, d);
  }
  void moe_combine_backward(const float* dy, const float* grouped, const int32_t* pos, const float* weights,
                            float* dgrouped, float* dweights, const MoeRouting& r, int64_t d) override {
    DT_CPU_OP("moe_combine_backward");
    dtrain::moe_combine_backward(dy, grouped, pos, weights, dgrouped, dweights, r, d);
  }
  void moe_route_backward(const float* scores, const int32_t* chosen, const float* dweights, const float* dscores,
                          float* dlogits, const MoeRouting& r) override {
    DT_CPU_OP("moe_route_backward");
    dtrain::moe_route_backward(scores, chosen, dweights, dscores, dlogits, r);
  }
  void rope_forward(float* qkv, const RopeShape& s) override {
    DT_CPU_OP("rope_forward");
    dtrain::rope_forward(qkv, s);
  }
  void rope_backward(float* dqkv, const RopeShape& s) override {
    DT_CPU_OP("rope_backward");
    dtrain::rope_backward(dqkv, s);
  }
  void activation_forward(Activation a, Operand x, float* y, int64_t n) override {
    DT_CPU_OP("activation_forward");
    dtrain::activation_forward(a, x, y, n);
  }
  void activation_backward(Activation a, Operand x, const float* dy, ActBuffer dx, int64_t n) override {
    DT_CPU_OP("activation_backward");
    dtrain::activation_backward(a, x, dy, dx, n);
  }
  void relu_backward_from_output(Operand y, const float* dy, ActBuffer dx, int64_t n, float scale) override {
    DT_CPU_OP("relu_backward_from_output");
    dtrain::relu_backward_from_output(y, dy, dx, n, scale);
  }
  void swiglu_forward(Operand a, ActBuffer y, int64_t rows, int64_t f) override {
    DT_CPU_OP("swiglu_forward");
    dtrain::swiglu_forward(a, y, rows, f);
  }
  void swiglu_backward(Operand a, const float* dy, ActBuffer da, int64_t rows, int64_t f) override {
    DT_CPU_OP("swiglu_backward");
    dtrain::swiglu_backward(a, dy, da, rows, f);
  }
  void dropout_forward(const float* x, ActBuffer y, int64_t rows, int64_t cols, const DropoutSpec& s) override {
    DT_CPU_OP("dropout_forward");
    dtrain::dropout_forward(x, y, rows, cols, s);
  }
  void dropout_backward(const float* dy, float* dx, int64_t rows, int64_t cols, const DropoutSpec& s) override {
    DT_CPU_OP("dropout_backward");
    dtrain::dropout_backward(dy, dx, rows, cols, s);
  }
  void embedding_forward(const int32_t* tokens, const float* wte, const float* pos, float* out, int64_t B,
                         int64_t T, int64_t d, VocabRange range) override {
    DT_CPU_OP("embedding_forward");
    dtrain::embedding_forward(tokens, wte, pos, out, B, T, d, range);
  }
  void embedding_backward(const int32_t* tokens, const float* dout, float* dwte, float* dpos, int64_t B, int64_t T,
                          int64_t d, VocabRange range) override {
    DT_CPU_OP("embedding_backward");
    dtrain::embedding_backward(tokens, dout, dwte, dpos, B, T, d, range);
  }
  void conv2d_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                      Precision p) override {
    DT_CPU_OP("conv2d_forward", 2.0 * s.macs());
    dtrain::conv2d_forward(x, w, bias, y, s, p);
  }
  void conv2d_backward_input(const float* dy, const float* w, float* dx, const ConvShape& s, Precision p) override {
    DT_CPU_OP("conv2d_backward_input", 2.0 * s.macs());
    dtrain::conv2d_backward_input(dy, w, dx, s, p);
  }
  void conv2d_backward_weight(const float* x, const float* dy, float* dw, float* dbias, const ConvShape& s,
                              Precision p) override {
    DT_CPU_OP("conv2d_backward_weight", 2.0 * s.macs());
    dtrain::conv2d_backward_weight(x, dy, dw, dbias, s, p);
  }
  size_t maxpool_workspace_bytes(const PoolShape& s) override { return dtrain::maxpool_workspace_bytes(s); }
  void maxpool_forward(const float* x, float* y, void* workspace, const PoolShape& s) override {
    DT_CPU_OP("maxpool_forward");
    dtrain::maxpool_forward(x, y, workspace, s);
  }
  void maxpool_backward(const float* x, const float* y, const float* dy, float* dx, const void* workspace,
                        const PoolShape& s) override {
    DT_CPU_OP("maxpool_backward");
    dtrain::maxpool_backward(x, y, dy, dx, workspace, s);
  }
  void classifier_loss(const ClassifierArgs& a, float* per_row, double* loss_sum) override {
    DT_CPU_OP("classifier_loss", a.flops());
    *loss_sum += classifier_cross_entropy(a, per_row);
  }
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWHyper& h) override {
    DT_CPU_OP("adamw_update");
    dtrain::adamw_update(p, g, m, v, n, h);
  }
  void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdHyper& h) override {
    DT_CPU_OP("sgd_update");
    dtrain::sgd_update(p, g, buf, n, h);
  }

 private:
  std::chrono::steady_clock::time_point mark_;
  HostOpProfile prof_;
};

}  // namespace

bool cpu_has_native_bf16() {
  return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
}

ComputeDevice& cpu_device() {
  static CpuDevice d;
  return d;
}

}  // namespace dtrain
