// A device that runs nothing and counts what is taken of it: the planner (`dtrain plan`) builds a
// rank's model, optimizer and strategies on it exactly as a run does, reads the bytes they took, and
// runs a training step on it, each kernel call telling what it would do (on_kernel) and touching nothing.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "kernels/device.hpp"

namespace dtrain {

// What one kernel call would do: the kernel (ComputeDevice's name for it), its family ("matmul",
// "attention", "conv", "classifier": the fused head and loss; "stream": element-wise; "optimizer":
// the update), its FLOPs and the bytes it reads and writes; a matrix product's M, N, K (attention:
// B·H, T, Dh; the head: N, V, d).
struct KernelWork {
  const char* name;
  const char* family;
  double flops = 0.0, bytes = 0.0;
  int64_t M = 0, N = 0, K = 0;
  Precision precision = Precision::f32;
  bool trans_a = false, trans_b = false;  // a matrix product's operand layouts (MatmulArgs)
};

// What a backend's kernels keep for themselves between calls (ComputeDevice::kernel_scratch_bytes),
// told the calls that take some: each computes its sizes with the backend's own functions, those its
// kernels size their scratch with. The CPU's: cpu_scratch_model().
class ScratchModel {
 public:
  virtual ~ScratchModel() = default;
  // a_bf16, b_bf16: the operand is stored in bf16 (Operand)
  virtual void matmul(const MatmulArgs& a, bool a_bf16 = false, bool b_bf16 = false) = 0;
  virtual void norm_backward(bool rms, int64_t rows, int64_t dim) = 0;
  // qkv_bf16, probs_bf16: stored in bf16
  enum class AttentionPass { probabilities, forward, backward };  // (probabilities: a forward without output)
  virtual void attention(const AttentionShape& s, const DropoutSpec& d, AttentionPass pass, bool qkv_bf16,
                         bool probs_bf16) = 0;
  virtual void attention_block(const AttentionBlocks& a, const SequenceShard& keys, bool backward) = 0;
  virtual void rope(const RopeShape& s) = 0;
  virtual void classifier_loss(const ClassifierArgs& a) = 0;
  virtual size_t bytes() const = 0;  // what the calls told so far would leave held
};
// The CPU backend's (kernels/cpu/scratch_model.cpp), on a CPU with or without bf16 products.
std::unique_ptr<ScratchModel> cpu_scratch_model(bool bf16_products);

class CountingDevice final : public ComputeDevice {
 public:
  // Every kernel call from now on, told (the planner times them).
  void on_kernel(std::function<void(const KernelWork&)> f) { on_kernel_ = std::move(f); }
  // `describe`: what it stands for, e.g. "H100 SXM (planned)".
  explicit CountingDevice(std::string describe = "counting device") : describe_(std::move(describe)) {}
  ~CountingDevice() override;
  CountingDevice(const CountingDevice&) = delete;
  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string describe() const override { return describe_; }
  // Addresses in a reserved range without backing memory (reads find zeros; see counting_device.cpp):
  // planning takes no memory for what it plans.
  void* allocate_zeroed(size_t bytes) override;
  void release(void* p) override;
  bool host_accessible() const override { return true; }
  size_t in_use() const { return in_use_; }  // bytes allocated and not yet released
  size_t peak_bytes() const override { return peak_; }  // the most in use at once

  void zero(void*, size_t) override {}
  void copy(void*, const void*, size_t) override {}
  void upload(void*, const void*, size_t) override {}
  void download(void*, const void*, size_t) override {}
  void synchronize() override {}
  void timer_start() override {}
  double timer_seconds() override { return 0.0; }
  size_t maxpool_workspace_bytes(const PoolShape& s) override { return cpu_device().maxpool_workspace_bytes(s); }
  // The scratch the backend `model` describes would keep after the kernels called so far (none
  // without one: a backend whose kernels keep none, or one not modelled, as CUDA's workspaces).
  void plan_scratch(std::unique_ptr<ScratchModel> model) { scratch_ = std::move(model); }
  // Whether the modelled backend's bf16 products copy f32 operands (the CPU's do; CUDA's read them):
  // what ComputeDevice::bf16_products_copy_f32_operands answers, so the model reads what it would.
  void set_bf16_products_copy_f32_operands(bool b) { copies_f32_operands_ = b; }
  bool bf16_products_copy_f32_operands() const override { return copies_f32_operands_; }
  // Whether the modelled device has bf16 products (ComputeDevice::bf16_products): without, a bf16
  // run keeps its activations in f32, as the model then builds it, and its kernels are told in f32.
  void set_bf16_products(bool b) { bf16_products_ = b; }
  bool bf16_products() const override { return bf16_products_; }
  size_t kernel_scratch_bytes() const override { return scratch_ ? scratch_->bytes() : 0; }

  // Kernels run nothing; each tells the planner's cost model what it would do (on_kernel, when set).
  void matmul(Operand A, Operand B, float*, const MatmulArgs& a) override {
    if (scratch_) scratch_->matmul(a, A.bf16, B.bf16);
    const Precision p = matmul_args_for(a, A.bf16, B.bf16).precision;
    work({"matmul", "matmul", 2.0 * double(a.M) * double(a.N) * double(a.K),
          double(A.bytes(a.M * a.K) + B.bytes(a.K * a.N)) + 4.0 * double(a.M * a.N), a.M, a.N, a.K, p, a.trans_a,
          a.trans_b});
  }
  void colsum_accumulate(Operand x, float*, int64_t rows, int64_t cols) override {
    stream("colsum_accumulate", double(x.bytes(rows * cols)));
  }
  void add(const float*, const float*, float*, int64_t n) override { stream("add", 12.0 * n); }
  void scale(float*, float, int64_t n) override { stream("scale", 8.0 * n); }
  void to_bf16(const float*, uint16_t*, int64_t n) override { stream("to_bf16", 6.0 * n); }
  void from_bf16(const uint16_t*, float*, int64_t n) override { stream("from_bf16", 6.0 * n); }
  void sumsq(const float*, int64_t n, double*) override { stream("sumsq", 4.0 * n); }
  void layernorm_forward(const float*, const float*, const float*, float*, float*, float*, int64_t rows, int64_t dim,
                         float) override {
    stream("layernorm_forward", 8.0 * rows * dim);
  }
  void layernorm_backward(const float*, const float*, const float*, const float*, const float*, float*, float*, float*,
                          int64_t rows, int64_t dim, bool) override {
    if (scratch_) scratch_->norm_backward(false, rows, dim);
    stream("layernorm_backward", 16.0 * rows * dim);
  }
  void rmsnorm_forward(const float*, const float*, float*, float*, int64_t rows, int64_t dim, float) override {
    stream("rmsnorm_forward", 8.0 * rows * dim);
  }
  void rmsnorm_backward(const float*, const float*, const float*, const float*, float*, float*, int64_t rows,
                        int64_t dim, bool) override {
    if (scratch_) scratch_->norm_backward(true, rows, dim);
    stream("rmsnorm_backward", 16.0 * rows * dim);
  }
  // (".dropout": with dropout on its probabilities, which a kernel may make apart: the CPU's does)
  void attention_forward(Operand qkv, float* out, ActBuffer probs, const AttentionShape& s, const DropoutSpec& d) override {
    if (scratch_)
      scratch_->attention(s, d, out ? ScratchModel::AttentionPass::forward : ScratchModel::AttentionPass::probabilities,
                          qkv.bf16, probs.bf16);
    attention(d.active() ? "attention_forward.dropout" : "attention_forward", s, s.T, 1.0);
  }
  void attention_backward(const float*, Operand qkv, Operand probs, float*, const AttentionShape& s,
                          const DropoutSpec& d) override {
    if (scratch_) scratch_->attention(s, d, ScratchModel::AttentionPass::backward, qkv.bf16, probs.bf16);
    attention(d.active() ? "attention_backward.dropout" : "attention_backward", s, s.T, 2.0);
  }
  void kv_block_pack(const float*, float*, const AttentionShape& s) override { stream("kv_block_pack", 16.0 * s.B * s.T * s.kv() * s.Dh); }
  void kv_block_unpack(const float*, float*, const AttentionShape& s) override {
    stream("kv_block_unpack", 16.0 * s.B * s.T * s.kv() * s.Dh);
  }
  void attention_block_forward(const float*, const float*, const SequenceShard& keys, float*, float*,
                               const AttentionBlocks& a, const DropoutSpec& d, bool) override {
    if (scratch_) scratch_->attention_block(a, keys, false);
    attention(d.active() ? "attention_block_forward.dropout" : "attention_block_forward", a.shape, a.shape.T, 1.0);
  }
  void attention_blocks_finish(float*, const float*, float*, const AttentionBlocks& a) override {
    stream("attention_blocks_finish", 8.0 * a.shape.B * a.shape.T * a.shape.H * a.shape.Dh);
  }
  void attention_blocks_delta(const float*, const float*, float*, const AttentionBlocks& a) override {
    stream("attention_blocks_delta", 8.0 * a.shape.B * a.shape.T * a.shape.H * a.shape.Dh);
  }
  void attention_block_backward(const float*, const float*, const float*, const SequenceShard& keys, const float*,
                                const float*, float*, float*, const AttentionBlocks& a, const DropoutSpec& d,
                                bool) override {
    if (scratch_) scratch_->attention_block(a, keys, true);
    attention(d.active() ? "attention_block_backward.dropout" : "attention_block_backward", a.shape, a.shape.T, 2.0);
  }
  void rope_forward(float*, const RopeShape& s) override {
    if (scratch_) scratch_->rope(s);
    stream("rope_forward", 8.0 * s.B * s.T * (s.heads + s.kv()) * s.head_dim);
  }
  void rope_backward(float*, const RopeShape& s) override {
    if (scratch_) scratch_->rope(s);
    stream("rope_backward", 8.0 * s.B * s.T * (s.heads + s.kv()) * s.head_dim);
  }
  void activation_forward(Activation a, Operand x, float*, int64_t n) override {
    stream(a == Activation::relu ? "relu_forward" : "gelu_forward", 4.0 * n + double(x.bytes(n)));
  }
  void activation_backward(Activation, Operand x, const float*, ActBuffer dx, int64_t n) override {
    stream("activation_backward", 4.0 * n + double(x.bytes(n)) + double(Operand(dx).bytes(n)));
  }
  void relu_backward_from_output(Operand y, const float*, ActBuffer dx, int64_t n, float) override {
    stream("relu_backward_from_output", 4.0 * n + double(y.bytes(n)) + double(Operand(dx).bytes(n)));
  }
  void swiglu_forward(Operand a, ActBuffer y, int64_t rows, int64_t f) override {
    stream("swiglu_forward", double(a.bytes(2 * rows * f)) + double(Operand(y).bytes(rows * f)));
  }
  void swiglu_backward(Operand a, const float*, ActBuffer da, int64_t rows, int64_t f) override {
    stream("swiglu_backward", 4.0 * rows * f + double(a.bytes(2 * rows * f)) + double(Operand(da).bytes(2 * rows * f)));
  }
  void dropout_forward(const float*, ActBuffer y, int64_t rows, int64_t cols, const DropoutSpec& s) override {
    if (s.p > 0 || y.bf16) stream("dropout_forward", 4.0 * rows * cols + double(Operand(y).bytes(rows * cols)));
  }
  void dropout_backward(const float*, float*, int64_t rows, int64_t cols, const DropoutSpec& s) override {
    if (s.p > 0) stream("dropout_backward", 8.0 * rows * cols);
  }
  void embedding_forward(const int32_t*, const float*, const float*, float*, int64_t B, int64_t T, int64_t d,
                         VocabRange) override {
    stream("embedding_forward", 12.0 * B * T * d);
  }
  void embedding_backward(const int32_t*, const float*, float*, float*, int64_t B, int64_t T, int64_t d,
                          VocabRange) override {
    stream("embedding_backward", 16.0 * B * T * d);
  }
  void conv2d_forward(const float*, const float*, const float*, float*, const ConvShape& s, Precision p) override {
    conv("conv2d_forward", s, p);
  }
  void conv2d_backward_input(const float*, const float*, float*, const ConvShape& s, Precision p) override { conv("conv2d_backward_input", s, p); }
  void conv2d_backward_weight(const float*, const float*, float*, float*, const ConvShape& s, Precision p) override {
    conv("conv2d_backward_weight", s, p);
  }
  void maxpool_forward(const float*, float*, void*, const PoolShape& s) override {
    stream("maxpool_forward", 4.0 * double(s.input_floats() + 2 * s.output_floats()));
  }
  void maxpool_backward(const float*, const float*, const float*, float*, const void*, const PoolShape& s) override {
    stream("maxpool_backward", 4.0 * double(2 * s.input_floats() + 2 * s.output_floats()));
  }
  // The fused head: logits, their softmax and its gradient, dx and dW: three products of N × V × d.
  void classifier_loss(const ClassifierArgs& a, float*, double*) override {
    if (scratch_) scratch_->classifier_loss(a);
    work({"classifier_loss", "classifier", 6.0 * double(a.N) * double(a.V) * double(a.d),
          4.0 * double(a.N * a.d + a.V * a.d) * 3.0 + 8.0 * double(a.N) * double(a.V), a.N, a.V, a.d, a.precision});
  }
  void adamw_update(float*, const float*, float*, float*, int64_t n, const AdamWHyper&) override {
    work({"adamw_update", "optimizer", 0.0, 28.0 * double(n), 0, 0, 0, Precision::f32});
  }
  void sgd_update(float*, const float*, float*, int64_t n, const SgdHyper&) override {
    work({"sgd_update", "optimizer", 0.0, 16.0 * double(n), 0, 0, 0, Precision::f32});
  }
  // The routing is the data's: planned as balanced (each expert the same share of the chosen rows),
  // its counts written where the layer reads them on the host.
  void moe_route(const float*, float*, int32_t*, float*, int64_t* counts, int64_t* offsets, int32_t*, int32_t*,
                 const MoeRouting& r) override {
    offsets[0] = 0;
    for (int64_t e = 0; e < r.experts; ++e) {
      counts[e] = r.chosen() / r.experts + (e < r.chosen() % r.experts ? 1 : 0);
      offsets[e + 1] = offsets[e] + counts[e];
    }
    stream("moe_route", 8.0 * double(r.rows * r.experts));
  }
  void moe_gather(const float*, const int32_t*, float*, int64_t n, int64_t d) override { stream("moe_gather", 8.0 * n * d); }
  void moe_combine(const float*, const int32_t*, const float*, float*, const MoeRouting& r, int64_t d) override {
    stream("moe_combine", 8.0 * double(r.chosen() * d));
  }
  void moe_combine_backward(const float*, const float*, const int32_t*, const float*, float*, float*,
                            const MoeRouting& r, int64_t d) override {
    stream("moe_combine_backward", 16.0 * double(r.chosen() * d));
  }
  void moe_route_backward(const float*, const int32_t*, const float*, const float*, float*,
                          const MoeRouting& r) override {
    stream("moe_route_backward", 12.0 * double(r.rows * r.experts));
  }

 private:
  void work(KernelWork w) {
    if (!bf16_products_) w.precision = Precision::f32;  // what a device without bf16 products computes in
    if (on_kernel_) on_kernel_(w);
  }
  void stream(const char* name, double bytes) { work({name, "stream", 0.0, bytes, 0, 0, 0, Precision::f32}); }
  // Scores and weighted values: 4·B·H·T·keys·Dh FLOPs a pass (half of them under the causal mask),
  // `times` that for a backward; the bytes: the packed q, k, v rows and the output, and the
  // probabilities [B, H, T, keys] this kernel keeps (written forward, read and their gradient made
  // backward).
  void attention(const char* name, const AttentionShape& s, int64_t keys, double times) {
    const double flops = 4.0 * double(s.B * s.H) * double(s.T) * double(keys) * double(s.Dh) * (s.causal ? 0.5 : 1.0);
    const double rows = 4.0 * double(s.B * s.T) * double(s.row_width() + s.H * s.Dh);
    const double probs = 4.0 * double(s.B * s.H) * double(s.T) * double(keys);
    work({name, "attention", times * flops, times * (rows + probs), s.B * s.H, s.T, s.Dh, s.precision});
  }
  void conv(const char* name, const ConvShape& s, Precision p) {
    work({name, "conv", 2.0 * s.macs(), 4.0 * double(s.input_floats() + s.output_floats() + s.weight_floats()), 0, 0, 0, p});
  }

  std::function<void(const KernelWork&)> on_kernel_;
  std::unique_ptr<ScratchModel> scratch_;

  std::string describe_;
  bool copies_f32_operands_ = true;
  bool bf16_products_ = true;
  std::multimap<void*, size_t> live_;
  void* slot_ = nullptr;  // its share of the reserved range (taken at the first block)
  size_t next_ = 0;       // where the next block starts in it
  size_t touched_ = 0;    // how far blocks have reached into it
  size_t in_use_ = 0, peak_ = 0;
};

}  // namespace dtrain
