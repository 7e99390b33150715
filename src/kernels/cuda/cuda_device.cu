// The CUDA ComputeDevice: one GPU, one compute stream on which every kernel is queued in order,
// cuBLASLt for matrix products, cuDNN for convolution and pooling, pinned staging buffers for uploads
// (the host returns at once), grow-only scratch, CUDA events for timing, its own count of memory held,
// NVML for how busy it is.
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/cudnn_conv.hpp"
#include "kernels/cuda/kernels.cuh"
#include "kernels/cuda/lt_matmul.hpp"
#include "kernels/cuda/nvml_usage.hpp"
#include "kernels/cuda/op_profile.hpp"

namespace dtrain {

namespace {

using namespace cuda;

// Times the call it opens (DTRAIN_PROFILE=1): the device's time of each kernel family.
#define DT_OP(name) OpProfile::Scope op_profile_scope_(*prof_, name)
#define DT_OP_FLOPS(name, flops) OpProfile::Scope op_profile_scope_(*prof_, name, flops)
// One part of a call, timed apart ("attention_forward/softmax") inside the call's own time.
#define DT_PART(name, ...)                          \
  do {                                              \
    OpProfile::Scope op_part_scope_(*prof_, name);  \
    __VA_ARGS__;                                    \
  } while (0)

// Phase marks as events on the compute stream: a phase's time is the stream's between two marks.
class EventMarks final : public MarkTimer {
 public:
  explicit EventMarks(cudaStream_t stream) : stream_(stream) {}
  ~EventMarks() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  // Never throws (a phase scope marks from its destructor, also while an error unwinds): the
  // first failure is kept and raised by intervals().
  void mark(size_t i) override {
    while (events_.size() <= i && failed_ == cudaSuccess) {
      cudaEvent_t e = nullptr;
      failed_ = cudaEventCreate(&e);
      if (failed_ == cudaSuccess) events_.push_back(e);
    }
    if (failed_ == cudaSuccess) failed_ = cudaEventRecord(events_[i], stream_);
  }
  void intervals(size_t n, double* out) override {
    DT_CUDA(failed_);
    if (n < 2) return;
    DT_CUDA(cudaEventSynchronize(events_[n - 1]));
    for (size_t i = 0; i + 1 < n; ++i) {
      float ms = 0.0f;
      DT_CUDA(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
      out[i] = double(ms) / 1000.0;
    }
  }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
  cudaError_t failed_ = cudaSuccess;
};

class CudaDevice final : public ComputeDevice {
 public:
  explicit CudaDevice(int index) : index_(index) {
    DT_CUDA(cudaSetDevice(index));
    DT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DT_CUDA(cudaEventCreate(&timer_start_));
    DT_CUDA(cudaEventCreate(&timer_stop_));
    for (auto& s : staging_) DT_CUDA(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    lt_ = std::make_unique<LtMatmul>(stream_);
    prof_ = std::make_unique<OpProfile>(stream_);
    cudaDeviceProp prop{};
    DT_CUDA(cudaGetDeviceProperties(&prop, index));
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f GiB", double(prop.totalGlobalMem) / double(1u << 30));
    memory_bytes_ = prop.totalGlobalMem;
    name_ = "cuda:" + std::to_string(index) + " (" + prop.name + ", sm_" + std::to_string(prop.major) +
            std::to_string(prop.minor) + ", " + mem + ")";
    char bus_id[32] = {};
    DT_CUDA(cudaDeviceGetPCIBusId(bus_id, int(sizeof bus_id), index));
    pci_bus_id_ = bus_id;
  }
  ~CudaDevice() override {
    cudaStreamSynchronize(stream_);
    cudnn_.reset();
    lt_.reset();
    marks_.reset();
    for (auto& s : staging_) {
      if (s.host) cudaFreeHost(s.host);
      cudaEventDestroy(s.done);
    }
    cudaEventDestroy(timer_start_);
    cudaEventDestroy(timer_stop_);
    cudaStreamDestroy(stream_);
  }

  DeviceKind kind() const override { return DeviceKind::cuda; }
  std::string describe() const override { return name_; }
  int index() const override { return index_; }
  void* stream() const override { return stream_; }
  size_t peak_bytes() const override { return std::max(peak_, live_ + pool_.bytes()) + (size_t(32) << 20); }
  size_t memory_bytes() const override { return memory_bytes_; }
  // NVML's figures for this GPU, found by its PCI bus id (NVML numbers GPUs its own way, ignoring
  // CUDA_VISIBLE_DEVICES); nullopt without NVML.
  std::optional<DeviceUsage> usage() override { return nvml_usage(pci_bus_id_); }

  void* allocate_zeroed(size_t bytes) override {
    const size_t rounded = bytes == 0 ? 256 : (bytes + 255) / 256 * 256;
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, rounded);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw ResourceExhausted("out of GPU memory on " + name_ + " allocating " + std::to_string(rounded >> 20) + " MiB (" +
                  std::to_string(live_ >> 20) + " MiB held): lower train.batch_size or the model size");
    }
    DT_CUDA(e);
    DT_CUDA(cudaMemsetAsync(p, 0, rounded, stream_));
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[p] = rounded;
    live_ += rounded;
    peak_ = std::max(peak_, live_);
    return p;
  }
  void release(void* p) override {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(p);
      if (it != sizes_.end()) {
        live_ -= it->second;
        sizes_.erase(it);
      }
    }
    cudaFree(p);
  }
  bool host_accessible() const override { return false; }

  void zero(void* p, size_t bytes) override {
    DT_OP("zero");
    DT_CUDA(cudaMemsetAsync(p, 0, bytes, stream_));
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    DT_OP("copy");
    if (dst != src) DT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  // Small uploads (batches of tokens) go through a ring of pinned buffers and return at once;
  // large ones (whole parameter sets, at load time) copy directly and wait.
  void upload(void* dst, const void* host, size_t bytes) override {
    DT_OP("upload");
    if (bytes == 0) return;
    if (bytes > kStagingMax) {
      DT_CUDA(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
      DT_CUDA(cudaStreamSynchronize(stream_));
      return;
    }
    Staging& s = staging_[next_staging_++ % kStaging];
    DT_CUDA(cudaEventSynchronize(s.done));  // its previous copy has ended (long ago, normally)
    if (s.bytes < bytes) {
      if (s.host) DT_CUDA(cudaFreeHost(s.host));
      s.host = nullptr;
      s.bytes = 0;
      DT_CUDA(cudaMallocHost(&s.host, bytes));
      s.bytes = bytes;
    }
    std::memcpy(s.host, host, bytes);
    DT_CUDA(cudaMemcpyAsync(dst, s.host, bytes, cudaMemcpyHostToDevice, stream_));
    DT_CUDA(cudaEventRecord(s.done, stream_));
  }
  void download(void* host, const void* src, size_t bytes) override {
    if (bytes) DT_CUDA(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_));
    DT_CUDA(cudaStreamSynchronize(stream_));
  }
  void synchronize() override { DT_CUDA(cudaStreamSynchronize(stream_)); }
  std::vector<OpTime> op_times() override { return prof_->take(); }
  MarkTimer* phase_timer() override {
    if (!marks_) marks_ = std::make_unique<EventMarks>(stream_);
    return marks_.get();
  }
  void timer_start() override { DT_CUDA(cudaEventRecord(timer_start_, stream_)); }
  double timer_seconds() override {
    DT_CUDA(cudaEventRecord(timer_stop_, stream_));
    DT_CUDA(cudaEventSynchronize(timer_stop_));
    float ms = 0.0f;
    DT_CUDA(cudaEventElapsedTime(&ms, timer_start_, timer_stop_));
    return double(ms) / 1000.0;
  }

  bool bf16_products_copy_f32_operands() const override { return lt_->converts_bf16(); }
  void matmul(Operand A, Operand B, float* C, const MatmulArgs& a) override {
    DT_OP_FLOPS("matmul", matmul_flops(a));
    DT_ASSERT(!(a.accumulate && a.relu));
    lt_->run(A, B, C, a);
    if (a.relu) cuda::activation_forward(Activation::relu, C, C, a.M * a.N, stream_);
  }
  void colsum_accumulate(Operand x, float* out, int64_t rows, int64_t cols) override {
    DT_OP("colsum_accumulate");
    cuda::colsum_accumulate(x, out, rows, cols, pool_, stream_);
  }
  void add(const float* a, const float* b, float* out, int64_t n) override {
    DT_OP("add");
    cuda::add(a, b, out, n, stream_);
  }
  void scale(float* x, float f, int64_t n) override {
    DT_OP("scale");
    cuda::scale(x, f, n, stream_);
  }
  void to_bf16(const float* x, uint16_t* y, int64_t n) override {
    DT_OP("to_bf16");
    cuda::to_bf16(x, y, n, stream_);
  }
  void from_bf16(const uint16_t* x, float* y, int64_t n) override {
    DT_OP("from_bf16");
    cuda::from_bf16(x, y, n, stream_);
  }
  void sumsq(const float* x, int64_t n, double* out) override {
    DT_OP("sumsq");
    cuda::sumsq(x, n, out, pool_, stream_);
  }
  void layernorm_forward(const float* x, const float* g, const float* b, float* y, float* mean, float* rstd,
                         int64_t rows, int64_t dim, float eps) override {
    DT_OP("layernorm_forward");
    cuda::layernorm_forward(x, g, b, y, mean, rstd, rows, dim, eps, stream_);
  }
  void layernorm_backward(const float* dy, const float* x, const float* g, const float* mean, const float* rstd,
                          float* dx, float* dg, float* db, int64_t rows, int64_t dim, bool acc) override {
    DT_OP("layernorm_backward");
    cuda::layernorm_backward(dy, x, g, mean, rstd, dx, dg, db, rows, dim, acc, pool_, stream_);
  }
  void rmsnorm_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t dim,
                       float eps) override {
    DT_OP("rmsnorm_forward");
    cuda::rmsnorm_forward(x, w, y, rstd, rows, dim, eps, stream_);
  }
  void rmsnorm_backward(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                        int64_t rows, int64_t dim, bool acc) override {
    DT_OP("rmsnorm_backward");
    cuda::rmsnorm_backward(dy, x, w, rstd, dx, dw, rows, dim, acc, pool_, stream_);
  }

  // The attention probabilities after dropout: `probs` itself when dropout is off.
  const float* dropped_probs(const float* probs, const AttentionShape& s, const DropoutSpec& drop) {
    if (!drop.active()) return probs;
    const int64_t cols = s.H * s.T * s.T;  // rows: the B samples; the spec may place a slice of heads
    float* pd = pool_.get(Scratch::attention_p, s.B * cols, stream_);
    cuda::dropout(probs, pd, s.B, cols, drop, stream_);
    return pd;
  }

  // qkv as f32 (stored in bf16: widened into the scratch).
  const float* qkv_f32(Operand qkv, const AttentionShape& s) {
    if (!qkv.bf16) return qkv.f32();
    const int64_t n = s.B * s.T * s.row_width();
    float* wide = pool_.get(Scratch::attention_qkv, n, stream_);
    cuda::from_bf16(qkv.b16(), wide, n, stream_);
    return wide;
  }
  // The probabilities stored in bf16, widened for the f32 kernels below.
  const float* probs_f32(Operand probs, const AttentionShape& s) {
    if (!probs.bf16) return probs.f32();
    const int64_t n = s.B * s.H * s.T * s.T;
    float* wide = pool_.get(Scratch::attention_scores, n, stream_);
    cuda::from_bf16(probs.b16(), wide, n, stream_);
    return wide;
  }

  // Our own attention: heads to contiguous blocks, S = scale·Q·Kᵀ, causal softmax (kept for
  // backward as `probs`, [B, H, T, T] like the CPU's), dropout with the CPU's masks, O = P·V.
  // Grouped-query attention (K = s.kv() kv heads, G = H / K query heads each): the G query heads
  // of kv head j are adjacent blocks of q [B, H, T, Dh] = [B, K, G·T, Dh], so each product is one
  // strided batch over (b, j) with G·T query rows, and dK, dV (a contraction over the G·T rows)
  // sum the group's heads inside the product. With K = H these are multi-head attention's products.
  // qkv stored in bf16 is widened first; probabilities stored in bf16 are computed in f32, rounded
  // (what dropout and P·V then read, as backward will) and stored. (A kernel reading and writing bf16
  // directly would save that traffic: GPU work, unmeasured.)
  void attention_forward(Operand qkv_in, float* out, ActBuffer probs_out, const AttentionShape& s,
                         const DropoutSpec& drop) override {
    DT_OP_FLOPS("attention_forward", s.flops(false));
    DT_ASSERT(s.kv() > 0 && s.kv() <= s.H && s.H % s.kv() == 0);
    const int64_t T = s.T, Dh = s.Dh, K = s.kv(), GT = s.group() * T, BK = s.B * K;
    const int64_t n = s.B * s.H * T * Dh, nk = BK * T * Dh;
    float *q = pool_.get(Scratch::attention_q, n, stream_), *k = pool_.get(Scratch::attention_k, nk, stream_),
          *v = pool_.get(Scratch::attention_v, nk, stream_), *o = pool_.get(Scratch::attention_o, n, stream_);
    const float* qkv = nullptr;
    DT_PART("attention_forward/widen", qkv = qkv_f32(qkv_in, s));
    float* probs = probs_out.bf16 ? pool_.get(Scratch::attention_scores, s.B * s.H * T * T, stream_) : probs_out.f32();
    DT_PART("attention_forward/split", split_heads(qkv, q, k, v, s.B, T, s.H, K, Dh, stream_));
    DT_PART("attention_forward/scores", lt_->run(q, k, probs, {GT, T, Dh, false, true, false, nullptr, s.precision}, BK,
                                                 GT * Dh, T * Dh, GT * T, 1.0f / std::sqrt(float(Dh))));
    DT_PART("attention_forward/softmax", softmax_rows(probs, s.B * s.H * T, T, s.causal, stream_));
    if (probs_out.bf16) DT_PART("attention_forward/round", cuda::to_bf16(probs, probs_out.b16(), s.B * s.H * T * T, stream_));
    if (!out) return;  // the probabilities only (recomputed for a backward)
    if (probs_out.bf16)  // what dropout and P·V read: the rounded values, as backward will
      DT_PART("attention_forward/round", cuda::round_to_bf16(probs, probs, s.B * s.H * T * T, stream_));
    const float* P = nullptr;
    DT_PART("attention_forward/dropout", P = dropped_probs(probs, s, drop));
    DT_PART("attention_forward/pv", lt_->run(P, v, o, {GT, Dh, T, false, false, false, nullptr, s.precision}, BK,
                                             GT * T, T * Dh, GT * Dh));
    DT_PART("attention_forward/merge", heads_to_rows(o, out, s.B, T, s.H, Dh, stream_));
  }
  void attention_backward(const float* dout, Operand qkv_in, Operand probs_in, float* dqkv,
                          const AttentionShape& s, const DropoutSpec& drop) override {
    DT_OP_FLOPS("attention_backward", s.flops(true));
    DT_ASSERT(s.kv() > 0 && s.kv() <= s.H && s.H % s.kv() == 0);
    const int64_t T = s.T, Dh = s.Dh, K = s.kv(), GT = s.group() * T, BK = s.B * K, TT = T * T;
    const int64_t n = s.B * s.H * T * Dh, nk = BK * T * Dh;
    const Precision p = s.precision;
    float *q = pool_.get(Scratch::attention_q, n, stream_), *k = pool_.get(Scratch::attention_k, nk, stream_),
          *v = pool_.get(Scratch::attention_v, nk, stream_), *dO = pool_.get(Scratch::attention_o, n, stream_);
    float* dq = pool_.get(Scratch::attention_dqkv, n + 2 * nk, stream_);
    float *dk = dq + n, *dv = dk + nk;
    float* dP = pool_.get(Scratch::attention_dp, s.B * s.H * TT, stream_);
    const float *qkv = nullptr, *probs = nullptr;
    DT_PART("attention_backward/widen", qkv = qkv_f32(qkv_in, s); probs = probs_f32(probs_in, s));
    // q, k, v again (other blocks have used the buffers since) and dO in head blocks
    DT_PART("attention_backward/split", split_heads(qkv, q, k, v, s.B, T, s.H, K, Dh, stream_);
            rows_to_heads(dout, dO, s.B, T, s.H, Dh, stream_));
    const float* P = nullptr;
    DT_PART("attention_backward/dropout", P = dropped_probs(probs, s, drop));  // drawn again: the same masks
    // dPd = dO·Vᵀ and dV = Pdᵀ·dO
    DT_PART("attention_backward/dp_dv",
            lt_->run(dO, v, dP, {GT, T, Dh, false, true, false, nullptr, p}, BK, GT * Dh, T * Dh, GT * T);
            lt_->run(P, dO, dv, {T, Dh, GT, true, false, false, nullptr, p}, BK, GT * T, GT * Dh, T * Dh));
    // dP = dPd·mask, then dS through the softmax
    DT_PART("attention_backward/softmax", cuda::dropout(dP, dP, s.B, s.H * TT, drop, stream_);
            softmax_backward_rows(probs, dP, s.B * s.H * T, T, stream_));
    const float scale = 1.0f / std::sqrt(float(Dh));
    // dQ = scale·dS·K and dK = scale·dSᵀ·Q
    DT_PART("attention_backward/dq_dk",
            lt_->run(dP, k, dq, {GT, Dh, T, false, false, false, nullptr, p}, BK, GT * T, T * Dh, GT * Dh, scale);
            lt_->run(dP, q, dk, {T, Dh, GT, true, false, false, nullptr, p}, BK, GT * T, GT * Dh, T * Dh, scale));
    DT_PART("attention_backward/merge", merge_heads3(dq, dk, dv, dqkv, s.B, T, s.H, K, Dh, stream_));
  }

  void rope_forward(float* qkv, const RopeShape& s) override {
    DT_OP("rope_forward");
    cuda::rope(qkv, s, false, stream_);
  }
  void rope_backward(float* dqkv, const RopeShape& s) override {
    DT_OP("rope_backward");
    cuda::rope(dqkv, s, true, stream_);
  }
  void activation_forward(Activation a, Operand x, float* y, int64_t n) override {
    DT_OP("activation_forward");
    cuda::activation_forward(a, x, y, n, stream_);
  }
  void activation_backward(Activation a, Operand x, const float* dy, ActBuffer dx, int64_t n) override {
    DT_OP("activation_backward");
    cuda::activation_backward(a, x, dy, dx, n, stream_);
  }
  void relu_backward_from_output(Operand y, const float* dy, ActBuffer dx, int64_t n, float scale) override {
    DT_OP("relu_backward_from_output");
    cuda::relu_backward_from_output(y, dy, dx, n, scale, stream_);
  }
  void swiglu_forward(Operand a, ActBuffer y, int64_t rows, int64_t f) override {
    DT_OP("swiglu_forward");
    cuda::swiglu_forward(a, y, rows, f, stream_);
  }
  void swiglu_backward(Operand a, const float* dy, ActBuffer da, int64_t rows, int64_t f) override {
    DT_OP("swiglu_backward");
    cuda::swiglu_backward(a, dy, da, rows, f, stream_);
  }
  void dropout_forward(const float* x, ActBuffer y, int64_t rows, int64_t cols, const DropoutSpec& s) override {
    DT_OP("dropout_forward");
    cuda::dropout(x, y, rows, cols, s, stream_);
  }
  void dropout_backward(const float* dy, float* dx, int64_t rows, int64_t cols, const DropoutSpec& s) override {
    DT_OP("dropout_backward");
    cuda::dropout(dy, dx, rows, cols, s, stream_);
  }
  void embedding_forward(const int32_t* tokens, const float* wte, const float* pos, float* out, int64_t B, int64_t T,
                         int64_t d, VocabRange range) override {
    DT_OP("embedding_forward");
    cuda::embedding_forward(tokens, wte, pos, out, B, T, d, range, stream_);
  }
  void embedding_backward(const int32_t* tokens, const float* dout, float* dwte, float* dpos, int64_t B, int64_t T,
                          int64_t d, VocabRange range) override {
    DT_OP("embedding_backward");
    cuda::embedding_backward(tokens, dout, dwte, dpos, B, T, d, range, stream_);
  }

  // Softmax cross-entropy of a chunk of logits rows [n, a.V]: the losses, and with a.dx the
  // gradient in place. One pass on its own; a vocabulary slice combines the row max, then the sums
  // and target logits (in device memory, on this stream) with the other slices' in between.
  // Columns from a.words on pad the slice (none when a.words is -1): no part of the softmax, gradient 0.
  // With a.correct, the rows whose (combined) target logit is the highest are counted into it.
  // `stats` holds 3 * n floats when a.combine is set.
  void softmax_rows_loss(const ClassifierArgs& a, float* logits, int64_t r0, int64_t n, float* losses, float* stats) {
    const int32_t* targets = a.targets + r0;
    const bool grad = a.dx != nullptr;
    const int64_t W = a.words >= 0 ? a.words : a.V;
    if (!a.combine) {
      softmax_cross_entropy_rows(logits, targets, losses, n, a.V, W, a.vocab_begin, grad, a.grad_scale, a.correct,
                                 stream_);
      return;
    }
    float* mx = stats;
    float* st = stats + n;  // 2 per row: sum of exponentials, target logit
    cross_entropy_row_max(logits, mx, n, a.V, W, stream_);
    a.combine->max(mx, n);
    cross_entropy_row_sums(logits, targets, mx, st, n, a.V, W, a.vocab_begin, stream_);
    a.combine->sum(st, 2 * n);
    cross_entropy_row_losses(logits, targets, mx, st, losses, n, a.V, W, a.vocab_begin, grad, a.grad_scale, a.correct,
                             stream_);
  }

  // Rows per chunk: as many as kClassifierBytes of logits hold; a vocabulary slice takes a fixed
  // count instead, since every slice must run the same chunks (its combiner is a collective).
  static int64_t classifier_chunk(const ClassifierArgs& a) {
    const int64_t rows = a.combine ? kCombinedChunk : kClassifierBytes / (4 * std::max<int64_t>(1, a.V));
    return std::max<int64_t>(1, std::min(a.N, rows));
  }

  // Convolution and max pooling through cuDNN (cudnn_conv.cu); its handle is made on first use, so
  // a model without convolutions never starts cuDNN.
  CudnnConv& cudnn() {
    if (!cudnn_) cudnn_ = std::make_unique<CudnnConv>(stream_, pool_);
    return *cudnn_;
  }
  void conv2d_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                      Precision p) override {
    DT_OP_FLOPS("conv2d_forward", 2.0 * s.macs());
    if (s.N == 0) return;
    cudnn().forward(x, w, bias, y, s, p);  // the device's image layout is NCHW (ImageLayout)
    if (s.relu) cuda::activation_forward(Activation::relu, y, y, s.output_floats(), stream_);
  }
  void conv2d_backward_input(const float* dy, const float* w, float* dx, const ConvShape& s, Precision p) override {
    DT_OP_FLOPS("conv2d_backward_input", 2.0 * s.macs());
    if (s.N > 0) cudnn().backward_input(dy, w, dx, s, p);
  }
  void conv2d_backward_weight(const float* x, const float* dy, float* dw, float* dbias, const ConvShape& s,
                              Precision p) override {
    DT_OP_FLOPS("conv2d_backward_weight", 2.0 * s.macs());
    if (s.N > 0) cudnn().backward_weight(x, dy, dw, dbias, s, p);
  }
  // cuDNN's backward finds each window's maximum again from x and y: no record is kept.
  size_t maxpool_workspace_bytes(const PoolShape&) override { return 0; }
  void maxpool_forward(const float* x, float* y, void*, const PoolShape& s) override {
    DT_OP("maxpool_forward");
    if (s.N > 0) cudnn().maxpool_forward(x, y, s);
  }
  void maxpool_backward(const float* x, const float* y, const float* dy, float* dx, const void*,
                        const PoolShape& s) override {
    DT_OP("maxpool_backward");
    if (s.N > 0) cudnn().maxpool_backward(x, y, dy, dx, s);
  }
  // Per chunk of rows (classifier_chunk): logits (bias fused), softmax rows (loss, and in place the
  // gradient), then dx and dW from two more products.
  void classifier_loss(const ClassifierArgs& a, float* per_row, double* loss_sum) override {
    DT_OP_FLOPS("classifier_loss", a.flops());
    if (a.N == 0) return;
    const int64_t chunk = classifier_chunk(a);
    float* logits = pool_.get(Scratch::classifier, chunk * a.V, stream_);
    float* losses = per_row ? per_row : pool_.get(Scratch::row_loss, a.N, stream_);
    float* stats = a.combine ? pool_.get(Scratch::row_stats, 3 * chunk, stream_) : nullptr;
    for (int64_t r0 = 0; r0 < a.N; r0 += chunk) {
      const int64_t n = std::min(chunk, a.N - r0);
      const float* xc = a.x + r0 * a.d;
      DT_PART("classifier_loss/logits",
              lt_->run(xc, a.W, logits, linear_forward_args(n, a.d, a.V, a.bias, a.precision)));
      DT_PART("classifier_loss/softmax", softmax_rows_loss(a, logits, r0, n, losses + r0, stats));
      if (!a.dx) continue;
      DT_PART("classifier_loss/dx", lt_->run(logits, a.W, a.dx + r0 * a.d,
                                             linear_backward_input_args(n, a.d, a.V, false, a.precision)));
      DT_PART("classifier_loss/dw", lt_->run(logits, xc, a.dW, linear_backward_weight_args(n, a.d, a.V, a.precision)));
      if (a.dbias) DT_PART("classifier_loss/dbias", cuda::colsum_accumulate(logits, a.dbias, n, a.V, pool_, stream_));
    }
    DT_PART("classifier_loss/sum", sum_into(losses, a.N, loss_sum, pool_, stream_));
  }
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWHyper& h) override {
    DT_OP("adamw_update");
    cuda::adamw(p, g, m, v, n, h, stream_);
  }
  void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdHyper& h) override {
    DT_OP("sgd_update");
    cuda::sgd(p, g, buf, n, h, stream_);
  }

 private:
  static constexpr size_t kStagingMax = size_t(64) << 20;
  static constexpr int kStaging = 4;
  static constexpr int64_t kClassifierBytes = int64_t(512) << 20;
  static constexpr int64_t kCombinedChunk = 2048;
  struct Staging {
    void* host = nullptr;
    size_t bytes = 0;
    cudaEvent_t done = nullptr;
  };

  int index_;
  std::string name_;
  size_t memory_bytes_ = 0;  // the GPU's total memory
  std::string pci_bus_id_;  // "0000:65:00.0": how NVML finds this GPU
  cudaStream_t stream_ = nullptr;
  cudaEvent_t timer_start_ = nullptr, timer_stop_ = nullptr;
  std::unique_ptr<LtMatmul> lt_;
  std::unique_ptr<EventMarks> marks_;
  std::unique_ptr<OpProfile> prof_;  // DTRAIN_PROFILE
  ScratchPool pool_;
  std::unique_ptr<CudnnConv> cudnn_;  // after pool_: destroyed before it
  Staging staging_[kStaging];
  size_t next_staging_ = 0;
  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
  size_t live_ = 0, peak_ = 0;
};

}  // namespace

int cuda_visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no GPU: not an error for this question
    return 0;
  }
  return n;
}

std::string cuda_device_id(int index) {
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, int(sizeof id), index) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

std::shared_ptr<ComputeDevice> make_cuda_device(int index) { return std::make_shared<CudaDevice>(index); }

}  // namespace dtrain
