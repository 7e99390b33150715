// ComputeDevice: everything the model, optimizer and trainer run on a device behind one interface:
// its memory, copies to and from the host, and the kernel families (their argument types: kernels/types.hpp).
// The CPU backend (kernels/cpu) and the CUDA backend (kernels/cuda) implement it, so model code is written once.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device_usage.hpp"
#include "core/error.hpp"
#include "core/phase_clock.hpp"
#include "kernels/types.hpp"
#include "tensor/memory.hpp"

namespace dtrain {

enum class DeviceKind { cpu, cuda };

// One kernel family's share of the device's time (ComputeDevice::op_times): matrix products count
// their FLOPs (2·M·N·K), other kernels 0.
struct OpTime {
  std::string name;
  double seconds = 0.0;
  double flops = 0.0;
  int64_t calls = 0;
};

// Work on a device is queued in order (on a CPU it runs at once); only download() and
// synchronize() wait for it. Pointers given to the kernels are the device's own memory.
class ComputeDevice : public Memory {
 public:
  virtual DeviceKind kind() const = 0;
  virtual std::string describe() const = 0;  // e.g. "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB)"
  // Local device index (which GPU); 0 on the CPU.
  virtual int index() const { return 0; }

  // Memory and copies. upload() may return before the copy ends (the host data is staged first).
  virtual void zero(void* p, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // The stream the kernels are queued on (cudaStream_t), for libraries that must order with them.
  virtual void* stream() const { return nullptr; }
  // Most device memory in use at once so far, in bytes (0 where not tracked).
  virtual size_t peak_bytes() const { return 0; }
  // The device's own memory, in bytes (a GPU's; 0 for the host, whose free memory the system says).
  virtual size_t memory_bytes() const { return 0; }
  // Host memory the kernels keep for themselves between calls, in bytes (the CPU kernels'
  // grow-only scratch, sized by the first step's shapes; 0 where none is kept).
  virtual size_t kernel_scratch_bytes() const { return 0; }
  // How busy the device is and its memory in use, read now (NVML on a GPU); nullopt where the
  // device cannot say (a CPU, a GPU without NVML). Never throws; callable from any thread.
  virtual std::optional<DeviceUsage> usage() { return std::nullopt; }
  // The time of each kernel family since the last call, largest first, where the device measures it
  // (op_profile_requested() when it was made: CUDA events on a GPU, the host's clock on the CPU);
  // empty otherwise. Waits for the device.
  virtual std::vector<OpTime> op_times() { return {}; }

  // Timing on the device's own clock (CUDA events on a GPU): timer_start() marks the queue;
  // timer_seconds() waits for the queue and returns the device time since that mark.
  virtual void timer_start() = 0;
  virtual double timer_seconds() = 0;
  // The clock step phases are measured on (core/phase_clock): null = the host's; a GPU records its
  // marks as events on the compute stream, so a phase is the device's time between two marks.
  virtual MarkTimer* phase_timer() { return nullptr; }

  // Kernels: each does what the CPU kernel of the same name does (its header in kernels/cpu says what
  // that is; the CUDA kernels match it).
  // Either operand may be stored in bf16 (Operand): the product is then a bf16 one.
  virtual void matmul(Operand A, Operand B, float* C, const MatmulArgs& a) = 0;
  // Whether its products run in bf16 when asked (a CPU without bf16 support computes them in f32:
  // activations are then not kept in bf16, which would change its numbers).
  virtual bool bf16_products() const { return true; }
  // Whether its bf16 products copy an f32 operand to bf16 first (the CPU: oneDNN multiplies bf16
  // inputs). One that reads f32 operands as they are (CUDA's FAST_16BF) answers false: a weight's bf16
  // copy then pays only where the other operand is bf16 too (nn/layers.hpp: weight_operand).
  virtual bool bf16_products_copy_f32_operands() const { return true; }
  // A Linear layer's two backward products from its output gradient dy [rows, out]: dW [out, in] +=
  // dyᵀ·x, then dx [rows, in] = dy·W (added with accumulate_dx), as matmul with
  // linear_backward_weight_args and linear_backward_input_args computes them. A device may share work
  // between the two (the CPU rounds dy to bf16 once for both). dx overlaps neither dy nor x; x, dy
  // (a gradient kept for products) and W (its bf16 copy) may be stored in bf16.
  virtual void linear_backward(Operand x, Operand dy, Operand W, float* dW, float* dx, int64_t rows,
                               int64_t in, int64_t out, bool accumulate_dx, Precision p) {
    matmul(dy, x, dW, linear_backward_weight_args(rows, in, out, p));
    matmul(dy, W, dx, linear_backward_input_args(rows, in, out, accumulate_dx, p));
  }
  virtual void colsum_accumulate(Operand x, float* out, int64_t rows, int64_t cols) = 0;
  virtual void add(const float* a, const float* b, float* out, int64_t n) = 0;  // out = a + b
  virtual void scale(float* x, float f, int64_t n) = 0;
  // bf16 (as its 16 bits) from f32, rounding to nearest even, and back (FSDP's bf16 gathers and reductions).
  virtual void to_bf16(const float* x, uint16_t* y, int64_t n) = 0;
  virtual void from_bf16(const uint16_t* x, float* y, int64_t n) = 0;
  // *out += sum of squares of x[0..n) (out is device memory, a double).
  virtual void sumsq(const float* x, int64_t n, double* out) = 0;
  virtual void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                 float* rstd, int64_t rows, int64_t dim, float eps) = 0;
  virtual void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                                  const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                                  int64_t dim, bool accumulate_dx) = 0;
  virtual void rmsnorm_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t dim,
                               float eps) = 0;
  virtual void rmsnorm_backward(const float* dy, const float* x, const float* w, const float* rstd, float* dx,
                                float* dw, int64_t rows, int64_t dim, bool accumulate_dx) = 0;
  // out null: the probabilities only (kernels/cpu/attention.hpp). qkv and probs may be stored in
  // bf16 only where bf16_products(); then the products are bf16 ones whatever s.precision says.
  virtual void attention_forward(Operand qkv, float* out, ActBuffer probs, const AttentionShape& s,
                                 const DropoutSpec& drop) = 0;
  virtual void attention_backward(const float* dout, Operand qkv, Operand probs, float* dqkv,
                                  const AttentionShape& s, const DropoutSpec& drop) = 0;
  // Ring attention (context parallel): attention over blocks of keys merged as they come, for
  // AttentionBlocks (kernels/types.hpp; the CPU kernels' header kernels/cpu/attention_blocks.hpp says
  // what each does). A device without them throws Error naming the fix (the CPU has them).
  // The k and v heads of packed qkv rows as a block [B * T, 2 * K * Dh].
  virtual void kv_block_pack(const float*, float*, const AttentionShape&) { no_ring_attention(); }
  // A block's gradient [B * T, 2 * K * Dh] written into the k and v columns of dqkv.
  virtual void kv_block_unpack(const float*, float*, const AttentionShape&) { no_ring_attention(); }
  // One block (qkv, kv, keys): out [B * T, H * Dh] accumulates unnormalised, stats [B, H, T, 2] holds
  // each query row's running (maximum, sum of exponentials); first: both start here.
  virtual void attention_block_forward(const float* /*qkv*/, const float* /*kv*/, const SequenceShard& /*keys*/,
                                       float* /*out*/, float* /*stats*/, const AttentionBlocks&, const DropoutSpec&,
                                       bool /*first*/) {
    no_ring_attention();
  }
  // After the last block: out divided by each row's sum, lse [B, H, T] = maximum + log(sum).
  virtual void attention_blocks_finish(float* /*out*/, const float* /*stats*/, float* /*lse*/, const AttentionBlocks&) {
    no_ring_attention();
  }
  // Backward, once per pass: delta [B, H, T] = the row sums of dout ∘ out, per head.
  virtual void attention_blocks_delta(const float* /*dout*/, const float* /*out*/, float* /*delta*/,
                                      const AttentionBlocks&) {
    no_ring_attention();
  }
  // One block's backward (dout, qkv, kv, keys, lse, delta): the q columns of dqkv accumulate dQ
  // (first: written), dkv [B * T, 2 * K * Dh] accumulates the block's dK and dV.
  virtual void attention_block_backward(const float*, const float*, const float*, const SequenceShard&, const float*,
                                        const float*, float* /*dqkv*/, float* /*dkv*/, const AttentionBlocks&,
                                        const DropoutSpec&, bool /*first*/) {
    no_ring_attention();
  }
  // Mixture of experts (MoeRouting in kernels/types.hpp; what each does: kernels/cpu/moe.hpp). A device
  // without them throws Error naming the fix (the CPU has them).
  virtual void moe_route(const float* /*logits*/, float* /*scores*/, int32_t* /*chosen*/, float* /*weights*/,
                         int64_t* /*counts*/, int64_t* /*offsets*/, int32_t* /*row_of*/, int32_t* /*pos*/,
                         const MoeRouting&) {
    no_moe();
  }
  virtual void moe_gather(const float* /*x*/, const int32_t* /*row_of*/, float* /*grouped*/, int64_t /*n*/,
                          int64_t /*d*/) {
    no_moe();
  }
  virtual void moe_combine(const float* /*grouped*/, const int32_t* /*pos*/, const float* /*weights*/, float* /*y*/,
                           const MoeRouting&, int64_t /*d*/) {
    no_moe();
  }
  virtual void moe_combine_backward(const float* /*dy*/, const float* /*grouped*/, const int32_t* /*pos*/,
                                    const float* /*weights*/, float* /*dgrouped*/, float* /*dweights*/,
                                    const MoeRouting&, int64_t /*d*/) {
    no_moe();
  }
  virtual void moe_route_backward(const float* /*scores*/, const int32_t* /*chosen*/, const float* /*dweights*/,
                                  const float* /*dscores*/, float* /*dlogits*/, const MoeRouting&) {
    no_moe();
  }
  // Rotary position embedding, in place on the q and k heads of packed qkv (or their gradient).
  virtual void rope_forward(float* qkv, const RopeShape& s) = 0;
  virtual void rope_backward(float* dqkv, const RopeShape& s) = 0;
  // The activations' inputs (x; SwiGLU's a) may be stored in bf16 (kept so: read as their values).
  virtual void activation_forward(Activation a, Operand x, float* y, int64_t n) = 0;
  virtual void activation_backward(Activation a, Operand x, const float* dy, ActBuffer dx, int64_t n) = 0;
  virtual void relu_backward_from_output(Operand y, const float* dy, ActBuffer dx, int64_t n, float scale) = 0;
  virtual void swiglu_forward(Operand a, ActBuffer y, int64_t rows, int64_t f) = 0;
  virtual void swiglu_backward(Operand a, const float* dy, ActBuffer da, int64_t rows, int64_t f) = 0;
  // A [rows, cols] tile of an activation, placed by the spec's geometry; y may be stored in bf16
  // (then not over x, and written even when dropout is off).
  virtual void dropout_forward(const float* x, ActBuffer y, int64_t rows, int64_t cols, const DropoutSpec& s) = 0;
  virtual void dropout_backward(const float* dy, float* dx, int64_t rows, int64_t cols, const DropoutSpec& s) = 0;
  virtual void embedding_forward(const int32_t* tokens, const float* wte, const float* pos, float* out, int64_t B,
                                 int64_t T, int64_t d, VocabRange range) = 0;
  virtual void embedding_backward(const int32_t* tokens, const float* dout, float* dwte, float* dpos, int64_t B,
                                  int64_t T, int64_t d, VocabRange range) = 0;
  // Convolution and max pooling (NCHW): the contracts of kernels/cpu/conv.hpp.
  virtual void conv2d_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                              Precision p) = 0;
  virtual void conv2d_backward_input(const float* dy, const float* w, float* dx, const ConvShape& s, Precision p) = 0;
  virtual void conv2d_backward_weight(const float* x, const float* dy, float* dw, float* dbias, const ConvShape& s,
                                      Precision p) = 0;
  virtual size_t maxpool_workspace_bytes(const PoolShape& s) = 0;
  virtual void maxpool_forward(const float* x, float* y, void* workspace, const PoolShape& s) = 0;
  virtual void maxpool_backward(const float* x, const float* y, const float* dy, float* dx, const void* workspace,
                                const PoolShape& s) = 0;
  // classifier_cross_entropy, with the loss sum added to *loss_sum (device memory, a double). A
  // vocabulary slice's combiner is called with device memory.
  virtual void classifier_loss(const ClassifierArgs& a, float* per_row, double* loss_sum) = 0;
  virtual void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWHyper& h) = 0;
  virtual void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdHyper& h) = 0;

 private:
  [[noreturn]] void no_moe() const {
    throw Error("model.kind = moe runs on the CPU in this version; " + describe() +
                " has no mixture-of-experts kernels: set train.device = cpu");
  }
  [[noreturn]] void no_ring_attention() const {
    throw Error("context parallel (parallel.cp > 1) runs on the CPU in this version; " + describe() +
                " has no ring-attention kernels: set train.device = cpu, or parallel.cp = 1");
  }
};

// Whether the devices made from now on time each kernel family (ComputeDevice::op_times): DTRAIN_PROFILE
// set and not 0 (`bench_train --profile` sets it). Timing costs some speed; off, a branch per call.
inline bool op_profile_requested() {
  const char* v = std::getenv("DTRAIN_PROFILE");
  return v && *v && std::string(v) != "0";
}

// The process's CPU device, and whether this CPU runs bf16 matmuls natively (avx512_bf16 or AMX; bf16
// still works without, slower): both defined by the CPU backend (kernels/cpu/cpu_device.cpp).
ComputeDevice& cpu_device();
bool cpu_has_native_bf16();

// "cpu", "cuda" (the GPU of this process's local rank: local_rank mod the GPUs visible) or
// "cuda:N". Throws naming the fix when the CUDA backend is missing or cannot be loaded (its
// libraries), or no GPU is visible.
std::shared_ptr<ComputeDevice> make_device(const std::string& name, int local_rank);

// Whether this build has the CUDA backend (its plugin is beside the program); the number of GPUs
// visible (0 without the backend, or when its CUDA libraries cannot be loaded).
bool cuda_built();
int cuda_device_count();

// train.device resolved: "auto" becomes "cuda" when the CUDA backend loads and sees a GPU, else
// "cpu"; other settings stay. `why` says how it was decided ("4 GPUs visible", "no GPU visible
// (CUDA_VISIBLE_DEVICES=)", "this dtrain has no CUDA backend", the library that failed to load).
struct DeviceResolution {
  std::string device;
  std::string why;
};
DeviceResolution resolve_device(const std::string& setting);

// The PCI bus ids of the visible GPUs, in CUDA's order (empty without any).
std::vector<std::string> visible_gpu_ids();

}  // namespace dtrain
