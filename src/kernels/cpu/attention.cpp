// Attention kernels (see attention.hpp). The four products per head (Q·Kᵀ, P·V and their
// gradients) run as batched matmuls over strided views of the qkv rows; softmax, causal mask and
// dropout are row kernels in between. The causal mask does not save matmul work (a full T x T
// product is cheaper through a GEMM than a triangular loop at these sizes).
#include "kernels/cpu/attention.hpp"

#include <cmath>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {

namespace {

struct Views {
  Strided4 q, kt, k, v, vt, o, p, pt;
};

// Element strides of the [B, H, rows, cols] views; qkv and dqkv share the layout.
Views views(const AttentionShape& s) {
  const int64_t T = s.T, H = s.H, Dh = s.Dh, d = H * Dh, row = 3 * d;
  Views w;
  w.q = w.k = w.v = {{T * row, Dh, row, 1}};
  w.kt = w.vt = {{T * row, Dh, 1, row}};
  w.o = {{T * d, Dh, d, 1}};
  w.p = {{H * T * T, T * T, T, 1}};
  w.pt = {{H * T * T, T * T, 1, T}};
  return w;
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
  const int64_t d = s.H * s.Dh, n = s.B * s.H * s.T * s.T;
  const Views w = views(s);
  matmul_batched(qkv, w.q, qkv + d, w.kt, probs, w.p, s.B, s.H, s.T, s.T, s.Dh, 1.0f / std::sqrt(float(s.Dh)));
  softmax_rows(probs, s);
  const float* P = probs;
  if (drop.active()) {
    float* Pd = scratch(ScratchSlot::attention, n);
    dropout_forward(probs, Pd, s.B, s.H * s.T * s.T, drop);  // mask element (h*T + t)*T + j of sample b
    P = Pd;
  }
  matmul_batched(P, w.p, qkv + 2 * d, w.v, out, w.o, s.B, s.H, s.T, s.Dh, s.T, 1.0f);
}

void attention_backward(const float* dout, const float* qkv, const float* probs, float* dqkv, const AttentionShape& s,
                        const DropoutSpec& drop) {
  const int64_t d = s.H * s.Dh, n = s.B * s.H * s.T * s.T;
  const Views w = views(s);
  const float scale = 1.0f / std::sqrt(float(s.Dh));
  const float* P = probs;
  if (drop.active()) {
    float* Pd = scratch(ScratchSlot::attention, n);
    dropout_forward(probs, Pd, s.B, s.H * s.T * s.T, drop);
    P = Pd;
  }
  float* dP = scratch(ScratchSlot::attention_grad, n);
  matmul_batched(dout, w.o, qkv + 2 * d, w.vt, dP, w.p, s.B, s.H, s.T, s.T, s.Dh, 1.0f);      // dPd = dO·Vᵀ
  matmul_batched(P, w.pt, dout, w.o, dqkv + 2 * d, w.v, s.B, s.H, s.T, s.Dh, s.T, 1.0f);      // dV = Pdᵀ·dO
  dropout_backward(dP, dP, s.B, s.H * s.T * s.T, drop);                                      // dP = dPd·mask
  softmax_backward_rows(probs, dP, s);                                                       // dS
  matmul_batched(dP, w.p, qkv + d, w.k, dqkv, w.q, s.B, s.H, s.T, s.Dh, s.T, scale);          // dQ = dS·K
  matmul_batched(dP, w.pt, qkv, w.q, dqkv + d, w.k, s.B, s.H, s.T, s.Dh, s.T, scale);         // dK = dSᵀ·Q
}

}  // namespace dtrain
