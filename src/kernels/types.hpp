// The kernel contract's argument types, shared by every backend (kernels/cpu, kernels/cuda) and by the
// code that calls the kernels through ComputeDevice (kernels/device.hpp): no backend's code is here.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "core/philox.hpp"

namespace dtrain {

// ---- Activations as stored ----------------------------------------------------------------------

// An operand a kernel reads as it is stored: f32, or bf16 (its 16 bits), where a run keeps activations
// in bf16 (train.precision = bf16). A product with a bf16 operand is a bf16 product (the other operand
// rounded to bf16, as Precision::bf16 rounds both).
struct Operand {
  const void* data = nullptr;
  bool bf16 = false;
  Operand() = default;
  Operand(std::nullptr_t) {}            // NOLINT
  Operand(const float* p) : data(p) {}  // NOLINT: f32 operands convert implicitly
  Operand(const uint16_t* p) : data(p), bf16(true) {}
  const float* f32() const {
    DT_ASSERT(!bf16);
    return static_cast<const float*>(data);
  }
  const uint16_t* b16() const {
    DT_ASSERT(bf16);
    return static_cast<const uint16_t*>(data);
  }
  // An operand of this one's type over other memory (a copy of it, rows gathered with it).
  Operand like(const void* p) const {
    return bf16 ? Operand(static_cast<const uint16_t*>(p)) : Operand(static_cast<const float*>(p));
  }
  // The operand from element `n` on.
  Operand at(int64_t n) const { return like(static_cast<const char*>(data) + bytes(n)); }
  size_t bytes(int64_t n) const { return size_t(n) * (bf16 ? 2 : 4); }
};

// Where a kernel writes an activation: f32, or bf16 rounded to nearest even from the f32 it computes.
struct ActBuffer {
  void* data = nullptr;
  bool bf16 = false;
  ActBuffer() = default;
  ActBuffer(float* p) : data(p) {}  // NOLINT: f32 buffers convert implicitly
  ActBuffer(uint16_t* p) : data(p), bf16(true) {}
  // Memory at p taken as f32, or as bf16.
  static ActBuffer of(void* p, bool bf16) {
    return bf16 ? ActBuffer(static_cast<uint16_t*>(p)) : ActBuffer(static_cast<float*>(p));
  }
  operator Operand() const {  // NOLINT: what was written is read
    return bf16 ? Operand(static_cast<const uint16_t*>(data)) : Operand(static_cast<const float*>(data));
  }
  float* f32() const {
    DT_ASSERT(!bf16);
    return static_cast<float*>(data);
  }
  uint16_t* b16() const {
    DT_ASSERT(bf16);
    return static_cast<uint16_t*>(data);
  }
  // The buffer from element `n` on.
  ActBuffer at(int64_t n) const { return of(static_cast<char*>(data) + n * (bf16 ? 2 : 4), bf16); }
};

// f(in, out) with an element-wise kernel's input and output as stored: float* or uint16_t* (bf16
// bits) each, for a kernel written once as a template over both.
template <class F>
void with_stored_types(Operand in, ActBuffer out, F&& f) {
  if (in.bf16 && out.bf16)
    f(in.b16(), out.b16());
  else if (in.bf16)
    f(in.b16(), out.f32());
  else if (out.bf16)
    f(in.f32(), out.b16());
  else
    f(in.f32(), out.f32());
}

// ---- Matrix products (matmul) -------------------------------------------------------------------

// The multiply's compute precision: bf16 rounds the operands to bf16, f32 accumulation and output.
enum class Precision { f32, bf16 };

// Row-major: C[M,N] (+)= op(A)[M,K] · op(B)[K,N] (+ bias[N]); op = transpose when asked.
struct MatmulArgs {
  int64_t M, N, K;
  bool trans_a = false;  // A stored [K, M]
  bool trans_b = false;  // B stored [N, K]
  bool accumulate = false;  // C += result, else C = result
  const float* bias = nullptr;  // [N], added to every row (not with accumulate)
  Precision precision = Precision::f32;
  // C = ReLU(result + bias), in the same pass (not with accumulate); as max(x, 0) but for a
  // negative x's sign (-0) and NaNs, which may come out as the backend's ReLU leaves them
  bool relu = false;
};

// The arguments a product runs with when its operands are stored so: a bf16 operand makes it a bf16
// product (Operand).
inline MatmulArgs matmul_args_for(const MatmulArgs& a, bool a_bf16, bool b_bf16) {
  MatmulArgs e = a;
  if (a_bf16 || b_bf16) e.precision = Precision::bf16;
  return e;
}

// A product's floating-point operations (multiply and add counted apart).
inline double matmul_flops(const MatmulArgs& a) { return 2.0 * double(a.M) * double(a.N) * double(a.K); }

// The three products of a Linear layer with weights stored [out, in] as in PyTorch, as MatmulArgs
// for any device's matmul (operands in the order given):
// forward       y[rows, out] = x[rows, in] · Wᵀ + b            matmul(x, W, y, …)
// input grad    dx[rows, in] (+)= dy[rows, out] · W             matmul(dy, W, dx, …)
// weight grad   dW[out, in] += dyᵀ · x  (bias: colsum_accumulate) matmul(dy, x, dW, …)
inline MatmulArgs linear_forward_args(int64_t rows, int64_t in, int64_t out, const float* b, Precision p) {
  return {rows, out, in, false, true, false, b, p};
}
inline MatmulArgs linear_backward_input_args(int64_t rows, int64_t in, int64_t out, bool accumulate, Precision p) {
  return {rows, in, out, false, false, accumulate, nullptr, p};
}
inline MatmulArgs linear_backward_weight_args(int64_t rows, int64_t in, int64_t out, Precision p) {
  return {out, in, rows, true, false, true, nullptr, p};
}

// ---- Activations --------------------------------------------------------------------------------

// ReLU and GELU (tanh approximation).
enum class Activation { relu, gelu };

// ---- Context parallel: which positions a pass holds -----------------------------------------------

// The positions of each sample that a pass's rows hold. One process: all of them (T == 0: row t of a
// sample is position t). Under context parallel a rank holds two runs of `chunk` positions of every
// sample (chunks i and 2·cp−1−i of the sequence, so that causal attention costs every rank alike):
// local position t < chunk is global position first + t, t >= chunk is second + (t − chunk).
struct SequenceShard {
  int64_t T = 0;  // the whole sequence's length; 0: the pass holds all of it
  int64_t chunk = 0;
  int64_t first = 0, second = 0;
  bool active() const { return T > 0; }
  int64_t position(int64_t t) const { return !active() ? t : t < chunk ? first + t : second + (t - chunk); }
  // The global length of a sequence of which this shard holds `local` positions.
  int64_t global_length(int64_t local) const { return active() ? T : local; }
};

// ---- Dropout ------------------------------------------------------------------------------------

// Dropout with counter-based masks: the mask of element e of global sample s at (step, unit, site)
// is a pure function of those numbers, so forward and backward regenerate it instead of storing it,
// and every thread count, rank count, parallel layout and device draws the same mask. A kernel call
// sees a tile of the whole activation (some of its rows, some of its columns): the spec's geometry
// says where the tile stands, so a tensor- or sequence-parallel slice draws its part of the same mask.
struct DropoutSpec {
  float p = 0.0f;  // drop probability (resolution 1/65536); 0 = off
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t unit = 0;
  uint32_t site = 0;
  int64_t sample_offset = 0;  // global index of this batch's first row's sample
  int64_t sample_stride = 1;  // row b is global sample sample_offset + b * sample_stride
  // Geometry of the [rows, cols] tile a kernel is given within the whole [R, global_cols] activation:
  // whole row g = row_offset + local row is row g % rows_per_sample of sample g / rows_per_sample,
  // and local column c is column col_offset + c. The element index keyed is
  // (g % rows_per_sample) * global_cols + col_offset + c. Defaults: each row one whole sample.
  int64_t rows_per_sample = 1;
  int64_t row_offset = 0;   // sequence parallel: this slice's first row
  int64_t global_cols = 0;  // 0: the tile's own cols
  int64_t col_offset = 0;   // tensor parallel: this slice's first column
  // Context parallel: the sample's row g % rows_per_sample is its position sequence.position(g %
  // rows_per_sample) (rows_per_sample is then the shard's local length); inactive: the row itself.
  SequenceShard sequence;
  bool active() const { return p > 0.0f; }
  uint32_t threshold() const { return uint32_t(double(p) * 65536.0 + 0.5); }
  float scale() const { return 65536.0f / float(65536u - threshold()); }
  RandomStream stream(int64_t sample) const {
    return dropout_stream(seed, step, unit, site, uint32_t(sample_offset + sample * sample_stride));
  }
};

// ---- Attention ----------------------------------------------------------------------------------

// Multi-head scaled dot-product attention (causal or unmasked) and its grouped-query form (GQA:
// fewer key/value heads than query heads).
// qkv rows are [q | k | v]: q is H*Dh wide with query head h at columns h*Dh..(h+1)*Dh-1, then k
// and v, each K*Dh wide (K = kv_heads, K = H by default) with kv head j at j*Dh.. within its part.
// Query head h attends with kv head h / (H/K); with K = H that is head h itself (plain multi-head).
struct AttentionShape {
  int64_t B, T, H, Dh;
  bool causal = true;
  Precision precision = Precision::f32;  // of the score and value products (softmax is f32)
  int64_t kv_heads = 0;                  // 0: = H. Otherwise K, 0 < K <= H, K divides H
  int64_t kv() const { return kv_heads ? kv_heads : H; }
  int64_t group() const { return H / kv(); }                // query heads per kv head
  int64_t row_width() const { return (H + 2 * kv()) * Dh; }  // of qkv and dqkv
  // The products' operations (the causal mask not discounted): forward S = QKᵀ and PV, backward four.
  double flops(bool backward) const { return (backward ? 8.0 : 4.0) * double(B * H) * double(T * T) * double(Dh); }
};

// ---- Attention over blocks of keys (context parallel's ring) ------------------------------------

// Attention of a pass's queries to the keys and values of one block of positions at a time, merged
// as the blocks come (flash attention's running maximum and sum of exponentials): ring attention
// passes the blocks of every rank of a context-parallel group by, and each rank attends its queries
// to each. The queries are the q part of the pass's packed qkv rows [B * T, (H + 2K) * Dh] (shape s:
// T = the pass's local length), at the global positions `queries` gives; a block is [B * Tk, 2 * K *
// Dh] (each row its k heads then its v heads; kv_block_pack makes one of qkv rows), at the positions
// `keys` gives (Tk = keys' local length = T here: every rank holds as many). The causal mask and the
// dropout masks of the probabilities are those of the whole sequence at those global positions: the
// mask element of sample b, query head h, query position i, key position j is (h * L + i) * L + j,
// L the whole length (as attention_forward over the whole sequence keys it), and drop's geometry
// fields other than its keys (seed, step, unit, site, sample_offset, sample_stride, p) are ignored
// except global_cols / col_offset, which place this pass's heads among all heads (tensor parallel:
// col_offset = first head · L · L, global_cols = all heads · L · L; 0: the heads are all).
struct AttentionBlocks {
  AttentionShape shape;   // B, T (local), H, Dh, kv_heads, causal
  SequenceShard queries;  // positions of the pass's rows
};

// ---- Mixture of experts: routing, dispatch and combine ------------------------------------------

// A router's choice for `rows` tokens among `experts`: each token's scores (softmax over the experts,
// or the sigmoid of each), its top_k experts by score (ties to the lower expert index, best first)
// and their weights (the chosen scores, renormalised to sum 1 when `normalize`). The chosen tokens are
// grouped by expert for the experts' products: position p of the grouped rows holds token
// row_of[p]; expert e's rows are positions offsets[e] .. offsets[e + 1] − 1, in token order; slot j
// of token r sits at position pos[r·top_k + j].
struct MoeRouting {
  int64_t rows = 0, experts = 0, top_k = 0;
  bool sigmoid = false;
  bool normalize = true;
  // A capacity (0: none, dropless): of each sample's `sample_rows` rows, an expert takes at most
  // `capacity` copies, the first in token order (then choice order); the rest are dropped (pos -1).
  int64_t capacity = 0, sample_rows = 0;
  int64_t chosen() const { return rows * top_k; }
};

// ---- Rotary position embedding ------------------------------------------------------------------

// Rotary position embedding as Hugging Face's Llama applies it ("rotate half": dimension i of a head
// pairs with i + hd/2): for position p and i < hd/2, angle = p * theta^(-2i/hd);
// (x_i, x_{i+hd/2}) -> (x_i cos - x_{i+hd/2} sin, x_{i+hd/2} cos + x_i sin).
//
// The angles are computed as Hugging Face computes them, in float32, so that a model trained there
// sees the same rotations here (tests/unit/test_rope.cpp compares with torch: within 1.2e-7 at
// positions up to 4097):
//   inv_freq[i] = 1 / theta^(float(2i) / hd)   (the power rounded to float32, then the reciprocal
//                                               in float32: torch's float32 pow and division)
//   angle       = float(p) * inv_freq[i]        (one float32 product)
//   cos, sin    of that float32 angle
// At large positions the float32 angle is off the exact p * theta^(-2i/hd) by its rounding, up to
// about an ulp of the angle (angle * 1e-7 radians), and that error is what the reference model was
// trained with: exact (double) angles would differ from Hugging Face by it, so they are not used.
struct RopeShape {
  int64_t B = 0, T = 0;                           // rows are B*T, row r at position first_position + r % T
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // the packed [q | k | v] layout of grouped-query
                                                  // attention (AttentionShape); kv_heads 0: = heads
  float theta = 10000.0f;
  int64_t first_position = 0;
  SequenceShard sequence;  // context parallel: row r is at position first_position + sequence.position(r % T)
  int64_t kv() const { return kv_heads ? kv_heads : heads; }
  int64_t row_width() const { return (heads + 2 * kv()) * head_dim; }
};

// Hugging Face's inv_freq[i] for i < head_dim / 2 (see above), for the CPU and CUDA kernels alike
// (inline: the CUDA plugin computes it on the host and does not link the CPU kernels). torch takes
// theta ** (float(2i) / hd) as a float32 power; this is the correctly rounded float32 of the power
// (a double power, rounded once), which torch's float32 pow (SLEEF on the CPU, within 1 ulp) nearly
// always gives: against torch 1.13 every entry agrees for head_dim 64 and 128 at theta 1e4 and 5e5,
// and over other head sizes and thetas about 1 entry in 140 is 1 ulp apart (then angles far along
// the sequence can differ from torch's by an ulp of the angle).
inline float rope_inv_freq(int64_t i, int64_t head_dim, float theta) {
  const float e = float(2 * i) / float(head_dim);
  const float power = float(std::pow(double(theta), double(e)));
  return 1.0f / power;
}

// ---- Embedding ----------------------------------------------------------------------------------

// A vocabulary-parallel embedding holds the rows [vocab_begin, vocab_begin + vocab_count) of the
// table (wte's row 0 is word vocab_begin); words outside give zero rows. One process: 0 and V.
struct VocabRange {
  int64_t begin = 0, count = 0;
  bool holds(int32_t w) const { return w >= begin && w < begin + count; }
};

// The fixed sinusoidal position table, made on the host (and uploaded to the device that uses it):
// table[T, d]: P[t, 2i] = sin(t / 10000^(2i/d)), P[t, 2i+1] = cos(...)
void sinusoidal_table(float* table, int64_t T, int64_t d);

// ---- Classifier cross-entropy -------------------------------------------------------------------

// Combines per-row statistics with the other vocabulary slices' (in place, n values): the maximum,
// and the sum. Values are in the memory of the device the kernel runs on.
struct RowStatsCombiner {
  virtual ~RowStatsCombiner() = default;
  virtual void max(float* v, int64_t n) = 0;
  virtual void sum(float* v, int64_t n) = 0;
};

// Fused classifier + softmax cross-entropy. Vocabulary parallel: a slice of the classifier's rows,
// whose per-row max, sum of exponentials and target logit are combined with the other slices'
// through a RowStatsCombiner (never the logits).
struct ClassifierArgs {
  const float* x;        // [N, d] final hidden states
  Operand W;             // [V, d]: f32, or its bf16 copy (then the products are bf16 ones)
  const float* bias;     // [V] or null
  const int32_t* targets;  // [N]
  int64_t N, d, V;  // V: the classifier rows held (the vocabulary slice's size)
  Precision precision = Precision::f32;
  // Vocabulary parallel: W's row 0 is word vocab_begin, and `combine` joins the other slices. Rows
  // from `words` on pad the slice (a vocabulary the slices do not divide): their logits are left
  // out of the softmax and get no gradient. -1: every row is a word.
  int64_t vocab_begin = 0;
  int64_t words = -1;
  RowStatsCombiner* combine = nullptr;
  // When set, the rows whose prediction is their target are added to *correct (memory of the device
  // the kernel runs on): a classifier's right predictions, the prediction being the first class with
  // the highest score, as argmax picks (on CUDA across vocabulary slices, a tie with the target counts
  // as right).
  double* correct = nullptr;
  // Training: when dx is set, dx [N, d] is overwritten and dW [V, d], dbias [V] accumulated with
  // the gradient of grad_scale * sum of row losses.
  float grad_scale = 0.0f;
  float* dx = nullptr;
  float* dW = nullptr;
  float* dbias = nullptr;
  // The products' operations: the logits, and with dx the two gradient products.
  double flops() const { return (dx ? 6.0 : 2.0) * double(N) * double(d) * double(V); }
};

// ---- Convolution and pooling --------------------------------------------------------------------

// Where an image activation [N, C, H, W] lies in memory: NCHW, as the model and PyTorch see it, or
// the device's own layout for it (the CPU: channels in blocks of 16, oneDNN's nChw16c, or of 8 without
// AVX-512, when the block divides C, else NCHW; CUDA: NCHW), which spares the reorders between
// convolutions and the pooling after them. Both take the same bytes. Element-wise kernels (activations,
// ReLU's backward) may run on the device's layout; whatever reads positions (dropout's masks,
// flattening, the linear layers) needs NCHW.
enum class ImageLayout : uint8_t { nchw, device };

// 2-D convolution over NCHW activations (OIHW weights, as PyTorch stores them):
// x [N, C, H, W] * w [K, C, R, S] (+ bias [K]) → y [N, K, P, Q]; square stride and zero padding.
struct ConvShape {
  int64_t N = 0, C = 0, H = 0, W = 0;  // batch, input channels, input height and width
  int64_t K = 0, R = 0, S = 0;         // output channels, kernel height and width
  int64_t stride = 1, pad = 0;
  ImageLayout x_layout = ImageLayout::nchw;  // of x and dx
  ImageLayout y_layout = ImageLayout::nchw;  // of y and dy
  bool relu = false;                         // forward: y = ReLU(conv + bias), in the same pass
  int64_t P() const { return (H + 2 * pad - R) / stride + 1; }  // output height
  int64_t Q() const { return (W + 2 * pad - S) / stride + 1; }  // output width
  int64_t input_floats() const { return N * C * H * W; }
  int64_t output_floats() const { return N * K * P() * Q(); }
  int64_t weight_floats() const { return K * C * R * S; }
  // Multiply-adds of the forward pass (each backward half costs as many).
  double macs() const { return double(N) * double(K) * double(P()) * double(Q()) * double(C * R * S); }
};

// Max pooling of x [N, C, H, W] over kernel × kernel windows every `stride` (no padding; windows
// that do not fit are left out, as PyTorch's default floor mode does) → y [N, C, P, Q].
struct PoolShape {
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t kernel = 2, stride = 2;
  ImageLayout x_layout = ImageLayout::nchw;  // of x and dx; y and dy are NCHW
  int64_t P() const { return (H - kernel) / stride + 1; }
  int64_t Q() const { return (W - kernel) / stride + 1; }
  int64_t input_floats() const { return N * C * H * W; }
  int64_t output_floats() const { return N * C * P() * Q(); }
};

// ---- Optimizer updates --------------------------------------------------------------------------

// AdamW (PyTorch semantics, decoupled weight decay).
struct AdamWHyper {
  float lr, beta1, beta2, eps, weight_decay;
  int64_t step;  // 1-based, after increment
};

struct SgdHyper {
  float lr, momentum, weight_decay;
  bool first_step;  // momentum buffer starts as the first gradient (PyTorch)
};

}  // namespace dtrain
