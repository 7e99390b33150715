// A device that runs nothing and counts what is taken of it: the planner (`dtrain plan`) builds a
// rank's model, optimizer and strategies on it exactly as a run does, and reads the bytes they took.
#pragma once
#include <map>
#include <string>

#include "kernels/device.hpp"

namespace dtrain {

class CountingDevice final : public ComputeDevice {
 public:
  // `describe`: what it stands for, e.g. "H100 SXM (planned)".
  explicit CountingDevice(std::string describe = "counting device") : describe_(std::move(describe)) {}
  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string describe() const override { return describe_; }
  // Addresses in a reserved range nobody may touch (reading or writing one ends the process at once,
  // never silently): planning takes no memory.
  void* allocate_zeroed(size_t bytes) override;
  void release(void* p) override;
  bool host_accessible() const override { return true; }
  size_t in_use() const { return in_use_; }  // bytes allocated and not yet released
  size_t peak() const { return peak_; }      // the most in use at once
  size_t peak_bytes() const override { return peak_; }

  void zero(void*, size_t) override {}
  void copy(void*, const void*, size_t) override {}
  void upload(void*, const void*, size_t) override {}
  void download(void*, const void*, size_t) override {}
  void synchronize() override {}
  void timer_start() override {}
  double timer_seconds() override { return 0.0; }
  size_t maxpool_workspace_bytes(const PoolShape& s) override { return cpu_device().maxpool_workspace_bytes(s); }

  // Planning runs no kernel: each of these is an internal error.
  void matmul(const float*, const float*, float*, const MatmulArgs&) override { no_kernel("matmul"); }
  void colsum_accumulate(const float*, float*, int64_t, int64_t) override { no_kernel("colsum_accumulate"); }
  void add(const float*, const float*, float*, int64_t) override { no_kernel("add"); }
  void scale(float*, float, int64_t) override { no_kernel("scale"); }
  void to_bf16(const float*, uint16_t*, int64_t) override { no_kernel("to_bf16"); }
  void from_bf16(const uint16_t*, float*, int64_t) override { no_kernel("from_bf16"); }
  void sumsq(const float*, int64_t, double*) override { no_kernel("sumsq"); }
  void layernorm_forward(const float*, const float*, const float*, float*, float*, float*, int64_t, int64_t,
                         float) override {
    no_kernel("layernorm_forward");
  }
  void layernorm_backward(const float*, const float*, const float*, const float*, const float*, float*, float*, float*,
                          int64_t, int64_t, bool) override {
    no_kernel("layernorm_backward");
  }
  void rmsnorm_forward(const float*, const float*, float*, float*, int64_t, int64_t, float) override {
    no_kernel("rmsnorm_forward");
  }
  void rmsnorm_backward(const float*, const float*, const float*, const float*, float*, float*, int64_t, int64_t,
                        bool) override {
    no_kernel("rmsnorm_backward");
  }
  void attention_forward(const float*, float*, float*, const AttentionShape&, const DropoutSpec&) override {
    no_kernel("attention_forward");
  }
  void attention_backward(const float*, const float*, const float*, float*, const AttentionShape&,
                          const DropoutSpec&) override {
    no_kernel("attention_backward");
  }
  void rope_forward(float*, const RopeShape&) override { no_kernel("rope_forward"); }
  void rope_backward(float*, const RopeShape&) override { no_kernel("rope_backward"); }
  void activation_forward(Activation, const float*, float*, int64_t) override { no_kernel("activation_forward"); }
  void activation_backward(Activation, const float*, const float*, float*, int64_t) override {
    no_kernel("activation_backward");
  }
  void relu_backward_from_output(const float*, const float*, float*, int64_t, float) override {
    no_kernel("relu_backward_from_output");
  }
  void swiglu_forward(const float*, float*, int64_t, int64_t) override { no_kernel("swiglu_forward"); }
  void swiglu_backward(const float*, const float*, float*, int64_t, int64_t) override { no_kernel("swiglu_backward"); }
  void dropout_forward(const float*, float*, int64_t, int64_t, const DropoutSpec&) override {
    no_kernel("dropout_forward");
  }
  void dropout_backward(const float*, float*, int64_t, int64_t, const DropoutSpec&) override {
    no_kernel("dropout_backward");
  }
  void embedding_forward(const int32_t*, const float*, const float*, float*, int64_t, int64_t, int64_t,
                         VocabRange) override {
    no_kernel("embedding_forward");
  }
  void embedding_backward(const int32_t*, const float*, float*, float*, int64_t, int64_t, int64_t,
                          VocabRange) override {
    no_kernel("embedding_backward");
  }
  void conv2d_forward(const float*, const float*, const float*, float*, const ConvShape&, Precision) override {
    no_kernel("conv2d_forward");
  }
  void conv2d_backward_input(const float*, const float*, float*, const ConvShape&, Precision) override {
    no_kernel("conv2d_backward_input");
  }
  void conv2d_backward_weight(const float*, const float*, float*, float*, const ConvShape&, Precision) override {
    no_kernel("conv2d_backward_weight");
  }
  void maxpool_forward(const float*, float*, void*, const PoolShape&) override { no_kernel("maxpool_forward"); }
  void maxpool_backward(const float*, const float*, const float*, float*, const void*, const PoolShape&) override {
    no_kernel("maxpool_backward");
  }
  void classifier_loss(const ClassifierArgs&, float*, double*) override { no_kernel("classifier_loss"); }
  void adamw_update(float*, const float*, float*, float*, int64_t, const AdamWHyper&) override {
    no_kernel("adamw_update");
  }
  void sgd_update(float*, const float*, float*, int64_t, const SgdHyper&) override { no_kernel("sgd_update"); }

 private:
  [[noreturn]] void no_kernel(const char* name) const;

  std::string describe_;
  std::multimap<void*, size_t> live_;
  size_t next_ = 0;  // where the next block starts in the reserved range
  size_t in_use_ = 0, peak_ = 0;
};

}  // namespace dtrain
