// Attention kernels (see attention.hpp). The four products per head (Q·Kᵀ, P·V and their
// gradients) run as batched matmuls over strided views of the qkv rows; softmax, causal mask and
// dropout are row kernels in between. The causal mask does not save matmul work (a full T x T
// product is cheaper through a GEMM than a triangular loop at these sizes).
#include "kernels/cpu/attention.hpp"

#include <cmath>
#include <vector>

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

// Pd = P * mask * scale, the mask of row (b, h, t) being elements (h*T + t)*T … of sample b.
DT_SIMD void dropped_probs(const float* P, float* Pd, const AttentionShape& s, const DropoutSpec& drop) {
  const int64_t T = s.T, H = s.H;
  const uint32_t thr = drop.threshold();
  const float scale = drop.scale();
#pragma omp parallel
  {
    std::vector<uint8_t> keep(static_cast<size_t>(H * T * T));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < s.B; ++b) {
      dropout_mask(drop.stream(b), thr, 0, H * T * T, keep.data());
      const float* src = P + b * H * T * T;
      float* dst = Pd + b * H * T * T;
#pragma omp simd
      for (int64_t i = 0; i < H * T * T; ++i) dst[i] = keep[size_t(i)] ? src[i] * scale : 0.0f;
    }
  }
}

// dS = P * (dPd*mask*scale - rowsum(P * dPd*mask*scale)), in place on dP (rows of T).
DT_SIMD void softmax_backward_rows(const float* P, float* dP, const AttentionShape& s, const DropoutSpec& drop) {
  const int64_t T = s.T, H = s.H;
  const uint32_t thr = drop.threshold();
  const float scale = drop.active() ? drop.scale() : 1.0f;
#pragma omp parallel
  {
    std::vector<uint8_t> keep(static_cast<size_t>(T));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < s.B * H * T; ++r) {
      const int64_t b = r / (H * T), ht = r % (H * T);
      const float* pr = P + r * T;
      float* g = dP + r * T;
      if (drop.active()) {
        dropout_mask(drop.stream(b), thr, ht * T, T, keep.data());
        for (int64_t j = 0; j < T; ++j) g[j] = keep[size_t(j)] ? g[j] * scale : 0.0f;
      }
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < T; ++j) dot += pr[j] * g[j];
#pragma omp simd
      for (int64_t j = 0; j < T; ++j) g[j] = pr[j] * (g[j] - dot);
    }
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
    dropped_probs(probs, Pd, s, drop);
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
    dropped_probs(probs, Pd, s, drop);
    P = Pd;
  }
  float* dP = scratch(ScratchSlot::attention_grad, n);
  matmul_batched(dout, w.o, qkv + 2 * d, w.vt, dP, w.p, s.B, s.H, s.T, s.T, s.Dh, 1.0f);      // dPd = dO·Vᵀ
  matmul_batched(P, w.pt, dout, w.o, dqkv + 2 * d, w.v, s.B, s.H, s.T, s.Dh, s.T, 1.0f);      // dV = Pdᵀ·dO
  softmax_backward_rows(probs, dP, s, drop);                                                 // dS
  matmul_batched(dP, w.p, qkv + d, w.k, dqkv, w.q, s.B, s.H, s.T, s.Dh, s.T, scale);          // dQ = dS·K
  matmul_batched(dP, w.pt, qkv, w.q, dqkv + d, w.k, s.B, s.H, s.T, s.Dh, s.T, scale);         // dK = dSᵀ·Q
}

}  // namespace dtrain
