// Attention kernels (see attention.hpp): one (sample, head) pair per task, rows of T scores.
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/simd.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace dtrain {

DT_SIMD void attention_forward(const float* qkv, float* out, float* probs, const AttentionShape& s,
                       const DropoutSpec& drop) {
  const int64_t B = s.B, T = s.T, H = s.H, Dh = s.Dh, d = H * Dh, row = 3 * d;
  const float scale = 1.0f / std::sqrt(float(Dh));
  const uint32_t thr = drop.threshold();
  const float dscale = drop.active() ? drop.scale() : 1.0f;
#pragma omp parallel
  {
    std::vector<uint8_t> keep(T);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < B * H; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const float* base = qkv + b * T * row;
      float* P = probs + bh * T * T;
      for (int64_t t = 0; t < T; ++t) {
        const float* q = base + t * row + h * Dh;
        const int64_t n = s.causal ? t + 1 : T;
        float* pr = P + t * T;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          const float* k = base + j * row + d + h * Dh;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int64_t i = 0; i < Dh; ++i) dot += q[i] * k[i];
          pr[j] = dot * scale;
          mx = pr[j] > mx ? pr[j] : mx;
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
          pr[j] = fast_exp(pr[j] - mx);
          sum += pr[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < n; ++j) pr[j] *= inv;
        for (int64_t j = n; j < T; ++j) pr[j] = 0.0f;
        if (drop.active()) dropout_mask(drop.stream(b), thr, (h * T + t) * T, T, keep.data());
        float* o = out + (b * T + t) * d + h * Dh;
        std::memset(o, 0, sizeof(float) * Dh);
        for (int64_t j = 0; j < n; ++j) {
          const float w = drop.active() ? (keep[j] ? pr[j] * dscale : 0.0f) : pr[j];
          const float* v = base + j * row + 2 * d + h * Dh;
#pragma omp simd
          for (int64_t i = 0; i < Dh; ++i) o[i] += w * v[i];
        }
      }
    }
  }
}

DT_SIMD void attention_backward(const float* dout, const float* qkv, const float* probs, float* dqkv,
                        const AttentionShape& s, const DropoutSpec& drop) {
  const int64_t B = s.B, T = s.T, H = s.H, Dh = s.Dh, d = H * Dh, row = 3 * d;
  const float scale = 1.0f / std::sqrt(float(Dh));
  const uint32_t thr = drop.threshold();
  const float dscale = drop.active() ? drop.scale() : 1.0f;
#pragma omp parallel
  {
    std::vector<uint8_t> keep(T);
    std::vector<float> dp(T);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < B * H; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const float* base = qkv + b * T * row;
      float* dbase = dqkv + b * T * row;
      const float* P = probs + bh * T * T;
      for (int64_t t = 0; t < T; ++t) {
        std::memset(dbase + t * row + d + h * Dh, 0, sizeof(float) * Dh);
        std::memset(dbase + t * row + 2 * d + h * Dh, 0, sizeof(float) * Dh);
      }
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = s.causal ? t + 1 : T;
        const float* pr = P + t * T;
        const float* dot_ = dout + (b * T + t) * d + h * Dh;
        const float* q = base + t * row + h * Dh;
        if (drop.active()) dropout_mask(drop.stream(b), thr, (h * T + t) * T, T, keep.data());
        float dot_pdp = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
          const float* v = base + j * row + 2 * d + h * Dh;
          float* dv = dbase + j * row + 2 * d + h * Dh;
          const float m = drop.active() ? (keep[j] ? dscale : 0.0f) : 1.0f;
          const float w = pr[j] * m;
          float g = 0.0f;
#pragma omp simd reduction(+ : g)
          for (int64_t i = 0; i < Dh; ++i) {
            g += dot_[i] * v[i];
            dv[i] += w * dot_[i];
          }
          dp[j] = g * m;
          dot_pdp += pr[j] * dp[j];
        }
        float* dq = dbase + t * row + h * Dh;
        std::memset(dq, 0, sizeof(float) * Dh);
        for (int64_t j = 0; j < n; ++j) {
          const float ds = pr[j] * (dp[j] - dot_pdp) * scale;
          const float* k = base + j * row + d + h * Dh;
          float* dk = dbase + j * row + d + h * Dh;
#pragma omp simd
          for (int64_t i = 0; i < Dh; ++i) {
            dq[i] += ds * k[i];
            dk[i] += ds * q[i];
          }
        }
      }
    }
  }
}

}  // namespace dtrain
