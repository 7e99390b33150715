// Launchers of the CUDA kernels, one family per .cu file, all queued on the given stream.
// Their arguments are the contract's (kernels/types.hpp); each does what the CPU kernel of the same name
// does (kernels/cpu/*.hpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain::cuda {

// Grow-only device scratch for kernels that need temporary space (sized on the first step).
enum class Scratch { reduce, layernorm, rmsnorm, colsum, attention_q, attention_k, attention_v, attention_o, attention_p, attention_dqkv,
                     attention_dp, attention_qkv, attention_scores, classifier, row_loss, row_stats, conv_a, conv_b, conv_workspace, count };
class ScratchPool {
 public:
  ~ScratchPool();
  float* get(Scratch slot, int64_t n, cudaStream_t s);  // at least n floats, contents undefined
  size_t bytes() const;

 private:
  void* ptr_[int(Scratch::count)] = {};
  int64_t size_[int(Scratch::count)] = {};
};

// elementwise.cu
void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s);
void scale(float* x, float f, int64_t n, cudaStream_t s);
void to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t s);
void from_bf16(const uint16_t* x, float* y, int64_t n, cudaStream_t s);
// y = x rounded to the nearest bf16 (ties to even), kept as f32.
void round_to_bf16(const float* x, float* y, int64_t n, cudaStream_t s);
// x may be stored in bf16 (an activation's input kept so)
void activation_forward(Activation a, Operand x, float* y, int64_t n, cudaStream_t s);
// dx f32 (may alias dy) or bf16 (a gradient kept for products, rounded; over neither x nor dy)
void activation_backward(Activation a, Operand x, const float* dy, ActBuffer dx, int64_t n, cudaStream_t s);
void relu_backward_from_output(Operand y, const float* dy, ActBuffer dx, int64_t n, float scale, cudaStream_t s);
// a [rows, 2f] = [gate | up] rows, f32 or bf16; da may be a itself (f32).
void swiglu_forward(Operand a, ActBuffer y, int64_t rows, int64_t f, cudaStream_t s);
void swiglu_backward(Operand a, const float* dy, ActBuffer da, int64_t rows, int64_t f, cudaStream_t s);
// A [rows, cols] tile placed by the spec's geometry (DropoutSpec, kernels/types.hpp); in place allowed
// in f32; y may be stored in bf16 (not over x; written also when dropout is off).
void dropout(const float* x, ActBuffer y, int64_t rows, int64_t cols, const DropoutSpec& d, cudaStream_t s);
void adamw(float* p, const float* g, float* m, float* v, int64_t n, const AdamWHyper& h, cudaStream_t s);
void sgd(float* p, const float* g, float* buf, int64_t n, const SgdHyper& h, cudaStream_t s);

// reduce.cu: fixed-order reductions (the same result every run).
void sumsq(const float* x, int64_t n, double* out, ScratchPool& pool, cudaStream_t s);
void sum_into(const float* x, int64_t n, double* out, ScratchPool& pool, cudaStream_t s);
// x f32 or bf16 (a gradient kept so), summed in f32
void colsum_accumulate(Operand x, float* out, int64_t rows, int64_t cols, ScratchPool& pool, cudaStream_t s);

// layernorm.cu
void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                       int64_t rows, int64_t dim, float eps, cudaStream_t s);
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                        float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t dim, bool accumulate_dx,
                        ScratchPool& pool, cudaStream_t s);

// rmsnorm.cu
void rmsnorm_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t dim, float eps,
                     cudaStream_t s);
void rmsnorm_backward(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                      int64_t rows, int64_t dim, bool accumulate_dx, ScratchPool& pool, cudaStream_t s);

// embedding.cu: wte holds the words of `range` (row 0 is word range.begin); pos and dpos may be null.
void embedding_forward(const int32_t* tokens, const float* wte, const float* pos, float* out, int64_t B, int64_t T,
                       int64_t d, VocabRange range, cudaStream_t s);
void embedding_backward(const int32_t* tokens, const float* dout, float* dwte, float* dpos, int64_t B, int64_t T,
                        int64_t d, VocabRange range, cudaStream_t s);

// attention.cu: layout changes and row softmax around the batched matmuls.
// qkv [B*T, (H + 2K)*Dh] → q [B, H, T, Dh], k, v [B, K, T, Dh] (contiguous per head; K kv heads).
void split_heads(const float* qkv, float* q, float* k, float* v, int64_t B, int64_t T, int64_t H, int64_t K,
                 int64_t Dh, cudaStream_t s);
// dq [B, H, T, Dh], dk, dv [B, K, T, Dh] → dqkv [B*T, (H + 2K)*Dh]
void merge_heads3(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t B, int64_t T, int64_t H,
                  int64_t K, int64_t Dh, cudaStream_t s);
// o [B, H, T, Dh] ↔ out [B*T, H*Dh]
void heads_to_rows(const float* o, float* out, int64_t B, int64_t T, int64_t H, int64_t Dh, cudaStream_t s);
void rows_to_heads(const float* rows, float* o, int64_t B, int64_t T, int64_t H, int64_t Dh, cudaStream_t s);
// In place on [rows, T] score rows (row r is query position r % T): causal mask and softmax.
void softmax_rows(float* p, int64_t rows, int64_t T, bool causal, cudaStream_t s);
// dS = P * (dP - rowsum(P * dP)), in place on dP.
void softmax_backward_rows(const float* p, float* dp, int64_t rows, int64_t T, cudaStream_t s);

// rope.cu: rope_forward (inverse = false) or rope_backward (true), in place; head_dim at most 512.
void rope(float* qkv, const RopeShape& shape, bool inverse, cudaStream_t s);

// cross_entropy.cu: per row r of logits [n, V], the vocabulary slice [v0, v0 + V) of which only
// the first W (0 <= W <= V; W = V when every row is a word) are words and the rest padding. The
// max (from -FLT_MAX), the sum of exponentials and target matching see only the words (a target
// outside [v0, v0 + W) has logit 0 and no onehot): loss = logsumexp - logit[target]; with grad,
// logits become grad_scale * (softmax - onehot), and exactly 0 at padding. With `correct` (device
// memory, may be null), the rows whose target logit is >= the row max are added to *correct.
// Whole rows in one pass:
void softmax_cross_entropy_rows(float* logits, const int32_t* targets, float* losses, int64_t n, int64_t V, int64_t W,
                                int64_t v0, bool grad, float grad_scale, double* correct, cudaStream_t s);
// The same in three phases, so that the statistics can be combined across slices in between:
// mx[r] = row max; st[2r] = sum of exp(l - mx[r]), st[2r+1] = target logit; then losses (and grad).
void cross_entropy_row_max(const float* logits, float* mx, int64_t n, int64_t V, int64_t W, cudaStream_t s);
void cross_entropy_row_sums(const float* logits, const int32_t* targets, const float* mx, float* st, int64_t n,
                            int64_t V, int64_t W, int64_t v0, cudaStream_t s);
void cross_entropy_row_losses(float* logits, const int32_t* targets, const float* mx, const float* st, float* losses,
                              int64_t n, int64_t V, int64_t W, int64_t v0, bool grad, float grad_scale,
                              double* correct, cudaStream_t s);

}  // namespace dtrain::cuda
