// Attention kernels (see attention.hpp). The four products per head (Q·Kᵀ, P·V and their
// gradients) run as batched matmuls over strided views of the qkv rows; softmax, causal mask and
// dropout are row kernels in between. The causal mask does not save matmul work (a full T x T
// product is cheaper through a GEMM than a triangular loop at these sizes).
#include "kernels/cpu/attention.hpp"

#include <cmath>

#include "core/error.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/matmul.hpp"
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

// In place on the scores of every (b, h, t) row: causal mask, softmax.
DT_SIMD void softmax_rows(float* P, const AttentionShape& s) {
  const int64_t T = s.T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * s.H * T; ++r) {
    const int64_t t = r % T, n = s.causal ? t + 1 : T;
    float* pr = P + r * T;
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
}

// dS = P * (dP - rowsum(P * dP)), in place on dP (rows of T).
DT_SIMD void softmax_backward_rows(const float* P, float* dP, const AttentionShape& s) {
  const int64_t T = s.T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * s.H * T; ++r) {
    const float* pr = P + r * T;
    float* g = dP + r * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < T; ++j) dot += pr[j] * g[j];
#pragma omp simd
    for (int64_t j = 0; j < T; ++j) g[j] = pr[j] * (g[j] - dot);
  }
}

}  // namespace

void attention_forward(const float* qkv, float* out, float* probs, const AttentionShape& s, const DropoutSpec& drop) {
  check_shape(s);
  const int64_t K = s.kv(), G = s.group(), TT = s.T * s.T, n = attention_scores_floats(s);
  const Views w = views(s);
  const float scale = 1.0f / std::sqrt(float(s.Dh));
  for (int64_t g = 0; g < G; ++g)  // S = scale·Q·Kᵀ
    matmul_batched(qkv + g * s.Dh, w.q, qkv + w.k_at, w.kt, probs + g * TT, w.p, s.B, K, s.T, s.T, s.Dh, scale);
  softmax_rows(probs, s);
  if (!out) return;  // the probabilities only (recomputed for a backward)
  const float* P = probs;
  if (drop.active()) {
    float* Pd = scratch(ScratchSlot::attention, n);
    dropout_forward(probs, Pd, s.B, s.H * TT, drop);  // mask element (h*T + t)*T + j of sample b
    P = Pd;
  }
  for (int64_t g = 0; g < G; ++g)  // O = P·V
    matmul_batched(P + g * TT, w.p, qkv + w.v_at, w.v, out + g * s.Dh, w.o, s.B, K, s.T, s.Dh, s.T, 1.0f);
}

// A kv head's dK and dV sum its group's G products: the first writes, the others add, in the
// order of g (a fixed order: the same result for any thread count).
void attention_backward(const float* dout, const float* qkv, const float* probs, float* dqkv, const AttentionShape& s,
                        const DropoutSpec& drop) {
  check_shape(s);
  const int64_t K = s.kv(), G = s.group(), Dh = s.Dh, TT = s.T * s.T, n = attention_scores_floats(s);
  const Views w = views(s);
  const float scale = 1.0f / std::sqrt(float(Dh));
  const float* P = probs;
  if (drop.active()) {
    float* Pd = scratch(ScratchSlot::attention, n);
    dropout_forward(probs, Pd, s.B, s.H * TT, drop);
    P = Pd;
  }
  float* dP = scratch(ScratchSlot::attention_grad, n);
  for (int64_t g = 0; g < G; ++g) {
    matmul_batched(dout + g * Dh, w.o, qkv + w.v_at, w.vt, dP + g * TT, w.p, s.B, K, s.T, s.T, Dh, 1.0f);  // dPd = dO·Vᵀ
    matmul_batched(P + g * TT, w.pt, dout + g * Dh, w.o, dqkv + w.v_at, w.v, s.B, K, s.T, Dh, s.T, 1.0f,
                   g > 0);                                                                                // dV += Pdᵀ·dO
  }
  dropout_backward(dP, dP, s.B, s.H * TT, drop);  // dP = dPd·mask
  softmax_backward_rows(probs, dP, s);            // dS
  for (int64_t g = 0; g < G; ++g) {
    matmul_batched(dP + g * TT, w.p, qkv + w.k_at, w.k, dqkv + g * Dh, w.q, s.B, K, s.T, Dh, s.T, scale);  // dQ = dS·K
    matmul_batched(dP + g * TT, w.pt, qkv + g * Dh, w.q, dqkv + w.k_at, w.k, s.B, K, s.T, Dh, s.T, scale,
                   g > 0);                                                                                 // dK += dSᵀ·Q
  }
}

}  // namespace dtrain
