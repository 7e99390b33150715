// Attention kernels (see attention.hpp). The four products per head (Q·Kᵀ, P·V and their
// gradients) run as batched matmuls over strided views of the qkv rows; softmax, causal mask and
// dropout are row kernels in between. The causal mask does not save matmul work (a full T x T
// product is cheaper through a GEMM than a triangular loop at these sizes). In bf16 the products
// read bf16 operands (qkv, the dropped probabilities, dO and dS rounded once each, or kept so) and
// accumulate in f32; softmax and its backward compute in f32.
#include "kernels/cpu/attention.hpp"

#include <cmath>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {

namespace {

// Element strides of the [B, K, rows, cols] views of the query heads g, g + G, g + 2G, … (G the
// group size, K = H / G), one per kv head, and of the kv heads; qkv and dqkv share the layout.
// Batching over (B, K) pairs query head kv*G + g with kv head kv; the G members of a group are
// G such products (one when K = H, then these are plain multi-head attention's views).
struct Views {
  Strided4 q, k, kt, v, vt, o, p, pt;
  int64_t k_at, v_at;  // first columns of the k and v parts of a qkv row
};

Views views(const AttentionShape& s) {
  const int64_t T = s.T, H = s.H, Dh = s.Dh, G = s.group(), d = H * Dh, row = s.row_width(), TT = T * T;
  Views w;
  w.q = {{T * row, G * Dh, row, 1}};
  w.k = w.v = {{T * row, Dh, row, 1}};
  w.kt = w.vt = {{T * row, Dh, 1, row}};
  w.o = {{T * d, G * Dh, d, 1}};
  w.p = {{H * TT, G * TT, T, 1}};
  w.pt = {{H * TT, G * TT, 1, T}};
  w.k_at = d;
  w.v_at = d + s.kv() * Dh;
  return w;
}

void check_shape(const AttentionShape& s) {
  DT_ASSERT(s.kv() > 0 && s.kv() <= s.H && s.H % s.kv() == 0);
}

// One (b, h, t) row of T scores in place: causal mask (n of them seen), softmax.
inline void softmax_row(float* pr, int64_t n, int64_t T) {
  float mx = pr[0];
  for (int64_t j = 1; j < n; ++j) mx = pr[j] > mx ? pr[j] : mx;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    pr[j] = fast_exp(pr[j] - mx);
    sum += pr[j];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) pr[j] *= inv;
  for (int64_t j = n; j < T; ++j) pr[j] = 0.0f;
}

// Every row in place. (Two functions, not one with a branch on the output type: with the rounding
// in the same loop the compiler summed the f32 rows differently at some lengths.)
DT_SIMD void softmax_rows(float* P, const AttentionShape& s) {
  const int64_t T = s.T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * s.H * T; ++r) softmax_row(P + r * T, s.causal ? r % T + 1 : T, T);
}

// Every row of the scores S in place, then rounded into P stored in bf16 while it is in cache.
DT_SIMD void softmax_rows_to_bf16(float* S, uint16_t* P, const AttentionShape& s) {
  const int64_t T = s.T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * s.H * T; ++r) {
    softmax_row(S + r * T, s.causal ? r % T + 1 : T, T);
    round_into_bf16(S + r * T, T, P + r * T);
  }
}

// dS = P * (dP - rowsum(P * dP)) on one row of T, in place on g = dP's row; P f32 or bf16 (its bits).
template <class Prob>
inline void softmax_backward_row(const Prob* pr, float* g, int64_t T) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < T; ++j) dot += as_f32(pr[j]) * g[j];
#pragma omp simd
  for (int64_t j = 0; j < T; ++j) g[j] = as_f32(pr[j]) * (g[j] - dot);
}

// Every row, in place on dP (f32 products).
DT_SIMD void softmax_backward_rows(const float* P, float* dP, const AttentionShape& s) {
  const int64_t T = s.T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * s.H * T; ++r) softmax_backward_row(P + r * T, dP + r * T, T);
}

// Every row for bf16 products: P kept in bf16 (or f32), dS rounded into a bf16 buffer row by row (dP
// is overwritten too).
template <class Prob>
DT_SIMD void softmax_backward_rows_to_bf16(const Prob* P, float* dP, uint16_t* dS, const AttentionShape& s) {
  const int64_t T = s.T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * s.H * T; ++r) {
    softmax_backward_row(P + r * T, dP + r * T, T);
    round_into_bf16(dP + r * T, T, dS + r * T);
  }
}

// dS from dP: in place in f32, or into `dS16` for bf16 products.
void softmax_backward(Operand P, float* dP, uint16_t* dS16, const AttentionShape& s) {
  if (!dS16)
    softmax_backward_rows(P.f32(), dP, s);
  else if (P.bf16)
    softmax_backward_rows_to_bf16(P.b16(), dP, dS16, s);
  else
    softmax_backward_rows_to_bf16(P.f32(), dP, dS16, s);
}

// qkv as the bf16 products read it: as stored, or rounded once (matmul's copy buffer a).
Operand bf16_qkv(Operand qkv, const AttentionShape& s) {
  return qkv.bf16 ? qkv : Operand(matmul_bf16_copy(Bf16Copy::a, qkv.f32(), s.B * s.T * s.row_width()));
}

// A bf16 buffer of n elements in a float scratch slot.
uint16_t* bf16_scratch(ScratchSlot slot, int64_t n) { return reinterpret_cast<uint16_t*>(scratch(slot, (n + 1) / 2)); }

// Whether these kernels run in bf16 (a CPU without bf16 products keeps nothing in bf16: the plan
// asks ComputeDevice::bf16_products()).
bool bf16_call(const AttentionShape& s, Operand qkv, Operand probs) {
  DT_ASSERT(!(qkv.bf16 || probs.bf16) || matmul_bf16_available());
  return attention_in_bf16(s, qkv.bf16, probs.bf16);
}

// Whether a bf16 call takes a buffer for the dropped probabilities (not for P kept in bf16 without dropout).
bool drops_into_scratch(Operand P, const DropoutSpec& drop) { return !P.bf16 || drop.active(); }

// The probabilities after dropout, as a bf16 product reads them: P itself (stored in bf16, dropout
// off), or dropped (and rounded) into `into`.
const uint16_t* dropped_bf16(Operand P, uint16_t* into, const AttentionShape& s, const DropoutSpec& drop) {
  const int64_t cols = s.H * s.T * s.T;  // mask element (h*T + t)*T + j of sample b
  if (!drops_into_scratch(P, drop)) return P.b16();
  if (P.bf16)
    dropout_forward(P.b16(), into, s.B, cols, drop);
  else
    dropout_forward(P.f32(), ActBuffer(into), s.B, cols, drop);
  return into;
}

}  // namespace

bool attention_in_bf16(const AttentionShape& s, bool qkv_bf16, bool probs_bf16, bool bf16_products) {
  return qkv_bf16 || probs_bf16 || (s.precision == Precision::bf16 && bf16_products);
}

void attention_forward(Operand qkv_in, float* out, ActBuffer probs, const AttentionShape& s, const DropoutSpec& drop) {
  check_shape(s);
  const bool bf16 = bf16_call(s, qkv_in, probs);
  const int64_t K = s.kv(), G = s.group(), TT = s.T * s.T, n = attention_scores_floats(s);
  const Views w = views(s);
  const float scale = 1.0f / std::sqrt(float(s.Dh));
  const Operand qkv = bf16 ? bf16_qkv(qkv_in, s) : qkv_in;
  float* S = probs.bf16 ? scratch(ScratchSlot::attention, n) : probs.f32();
  for (int64_t g = 0; g < G; ++g)  // S = scale·Q·Kᵀ
    matmul_batched(qkv.at(g * s.Dh), w.q, qkv.at(w.k_at), w.kt, S + g * TT, w.p, s.B, K, s.T, s.T, s.Dh, scale);
  if (probs.bf16)
    softmax_rows_to_bf16(S, probs.b16(), s);
  else
    softmax_rows(S, s);
  if (!out) return;  // the probabilities only (recomputed for a backward)
  Operand P = probs;
  if (bf16) {
    P = dropped_bf16(probs, drops_into_scratch(probs, drop) ? bf16_scratch(ScratchSlot::attention_grad, n) : nullptr,
                     s, drop);
  } else if (drop.active()) {
    float* Pd = scratch(ScratchSlot::attention, n);
    dropout_forward(probs.f32(), Pd, s.B, s.H * TT, drop);  // mask element (h*T + t)*T + j of sample b
    P = Pd;
  }
  for (int64_t g = 0; g < G; ++g)  // O = P·V
    matmul_batched(P.at(g * TT), w.p, qkv.at(w.v_at), w.v, out + g * s.Dh, w.o, s.B, K, s.T, s.Dh, s.T, 1.0f);
}

// A kv head's dK and dV sum its group's G products: the first writes, the others add, in the
// order of g (a fixed order: the same result for any thread count).
void attention_backward(const float* dout, Operand qkv_in, Operand probs, float* dqkv, const AttentionShape& s,
                        const DropoutSpec& drop) {
  check_shape(s);
  const bool bf16 = bf16_call(s, qkv_in, probs);
  const int64_t K = s.kv(), G = s.group(), Dh = s.Dh, TT = s.T * s.T, n = attention_scores_floats(s);
  const Views w = views(s);
  const float scale = 1.0f / std::sqrt(float(Dh));
  const Operand qkv = bf16 ? bf16_qkv(qkv_in, s) : qkv_in;
  const Operand dO = bf16 ? Operand(matmul_bf16_copy(Bf16Copy::b, dout, s.B * s.T * s.H * Dh)) : Operand(dout);
  // One slot of f32 scores: Pd (f32, if dropped) is spent by dV's products before dP's overwrite it.
  // bf16 keeps Pd, then dS, in bf16 in the other slot (the forward's slot for its dropped probabilities).
  float* dP = scratch(ScratchSlot::attention, n);
  uint16_t* bf16_rows = bf16 ? bf16_scratch(ScratchSlot::attention_grad, n) : nullptr;
  Operand P = probs;
  if (bf16) {
    P = dropped_bf16(probs, bf16_rows, s, drop);
  } else if (drop.active()) {
    dropout_forward(probs.f32(), dP, s.B, s.H * TT, drop);
    P = dP;
  }
  for (int64_t g = 0; g < G; ++g)  // dV += Pdᵀ·dO
    matmul_batched(P.at(g * TT), w.pt, dO.at(g * Dh), w.o, dqkv + w.v_at, w.v, s.B, K, s.T, Dh, s.T, 1.0f, g > 0);
  for (int64_t g = 0; g < G; ++g)  // dPd = dO·Vᵀ
    matmul_batched(dO.at(g * Dh), w.o, qkv.at(w.v_at), w.vt, dP + g * TT, w.p, s.B, K, s.T, s.T, Dh, 1.0f);
  dropout_backward(dP, dP, s.B, s.H * TT, drop);  // dP = dPd·mask
  softmax_backward(probs, dP, bf16_rows, s);  // dS (in bf16: over Pd, spent)
  const Operand dS = bf16 ? Operand(bf16_rows) : Operand(dP);
  for (int64_t g = 0; g < G; ++g) {
    matmul_batched(dS.at(g * TT), w.p, qkv.at(w.k_at), w.k, dqkv + g * Dh, w.q, s.B, K, s.T, Dh, s.T, scale);  // dQ = dS·K
    matmul_batched(dS.at(g * TT), w.pt, qkv.at(g * Dh), w.q, dqkv + w.k_at, w.k, s.B, K, s.T, Dh, s.T, scale,
                   g > 0);                                                                                    // dK += dSᵀ·Q
  }
}

}  // namespace dtrain
