// Mixture-of-experts routing, dispatch and combine (see moe.hpp).
#include "kernels/cpu/moe.hpp"

#include <cmath>
#include <cstring>

#include "core/error.hpp"

namespace dtrain {

namespace {

// One token's scores from its logits: softmax over the experts, or each one's sigmoid.
void row_scores(const float* logit, float* score, int64_t E, bool sigmoid) {
  if (sigmoid) {
    for (int64_t e = 0; e < E; ++e) score[e] = 1.0f / (1.0f + std::exp(-logit[e]));
    return;
  }
  float mx = logit[0];
  for (int64_t e = 1; e < E; ++e) mx = logit[e] > mx ? logit[e] : mx;
  float sum = 0.0f;
  for (int64_t e = 0; e < E; ++e) sum += score[e] = std::exp(logit[e] - mx);
  for (int64_t e = 0; e < E; ++e) score[e] /= sum;
}

// The k best experts of one token, best first; of equal scores the lower expert first.
void row_top_k(const float* score, int32_t* chosen, int64_t E, int64_t k) {
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int64_t e = 0; e < E; ++e) {
      bool taken = false;
      for (int64_t i = 0; i < j; ++i) taken = taken || chosen[i] == int32_t(e);
      if (!taken && (best < 0 || score[e] > score[best])) best = int32_t(e);
    }
    chosen[j] = best;
  }
}

}  // namespace

void moe_route(const float* logits, float* scores, int32_t* chosen, float* weights, int64_t* counts,
               int64_t* offsets, int32_t* row_of, int32_t* pos, const MoeRouting& r) {
  const int64_t E = r.experts, k = r.top_k;
  DT_ASSERT(k >= 1 && k <= E);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < r.rows; ++t) {
    const float* s = scores + t * E;
    row_scores(logits + t * E, scores + t * E, E, r.sigmoid);
    row_top_k(s, chosen + t * k, E, k);
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += weights[t * k + j] = s[chosen[t * k + j]];
    if (r.normalize)
      for (int64_t j = 0; j < k; ++j) weights[t * k + j] /= sum;
  }
  // grouped by expert, in token order; over capacity: dropped (pos -1). (counts serves first as each
  // expert's copies so far in the sample, then as where its next copy goes: nothing is allocated.)
  const int64_t per_sample = r.capacity > 0 ? r.sample_rows * k : r.chosen();
  DT_ASSERT(r.capacity == 0 || (r.sample_rows > 0 && r.rows % r.sample_rows == 0));
  for (int64_t c = 0; c < r.chosen(); ++c) {
    if (c % per_sample == 0) std::memset(counts, 0, sizeof(int64_t) * size_t(E));  // a sample begins
    pos[c] = r.capacity > 0 && counts[chosen[c]] >= r.capacity ? -1 : 0;
    ++counts[chosen[c]];
  }
  std::memset(counts, 0, sizeof(int64_t) * size_t(E));
  for (int64_t c = 0; c < r.chosen(); ++c) counts[chosen[c]] += pos[c] == 0;
  offsets[0] = 0;
  for (int64_t e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + counts[e];
  std::memcpy(counts, offsets, sizeof(int64_t) * size_t(E));  // each expert's next place
  for (int64_t c = 0; c < r.chosen(); ++c) {
    if (pos[c] < 0) continue;
    const int64_t p = counts[chosen[c]]++;
    row_of[p] = int32_t(c / k);
    pos[c] = int32_t(p);
  }
  for (int64_t e = 0; e < E; ++e) counts[e] = offsets[e + 1] - offsets[e];
}

void moe_gather(const float* x, const int32_t* row_of, float* grouped, int64_t n, int64_t d) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < n; ++p) std::memcpy(grouped + p * d, x + int64_t(row_of[p]) * d, sizeof(float) * size_t(d));
}

void moe_combine(const float* grouped, const int32_t* pos, const float* weights, float* y, const MoeRouting& r,
                 int64_t d) {
  const int64_t k = r.top_k;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < r.rows; ++t) {
    float* out = y + t * d;
    bool first = true;
    for (int64_t j = 0; j < k; ++j) {
      if (pos[t * k + j] < 0) continue;  // dropped
      const float w = weights ? weights[t * k + j] : 1.0f;
      const float* g = grouped + int64_t(pos[t * k + j]) * d;
      if (first)
        for (int64_t i = 0; i < d; ++i) out[i] = w * g[i];
      else
        for (int64_t i = 0; i < d; ++i) out[i] += w * g[i];
      first = false;
    }
    if (first) std::memset(out, 0, sizeof(float) * size_t(d));  // every copy dropped
  }
}

void moe_combine_backward(const float* dy, const float* grouped, const int32_t* pos, const float* weights,
                          float* dgrouped, float* dweights, const MoeRouting& r, int64_t d) {
  const int64_t k = r.top_k;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < r.rows; ++t) {
    const float* g = dy + t * d;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t p = pos[t * k + j];
      const float w = weights[t * k + j];
      float dot = 0.0f;
      if (p < 0) {  // dropped: no output, no gradient
        dweights[t * k + j] = 0.0f;
        continue;
      }
      for (int64_t i = 0; i < d; ++i) {
        dgrouped[p * d + i] = w * g[i];
        dot += g[i] * grouped[p * d + i];
      }
      dweights[t * k + j] = dot;
    }
  }
}

void moe_route_backward(const float* scores, const int32_t* chosen, const float* dweights, const float* dscores,
                        float* dlogits, const MoeRouting& r) {
  const int64_t E = r.experts, k = r.top_k;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < r.rows; ++t) {
    const float* s = scores + t * E;
    const int32_t* c = chosen + t * k;
    const float* dw = dweights + t * k;
    float* dl = dlogits + t * E;
    // the chosen scores' gradient, through the renormalisation w_j = g_j / Σ g
    float sum = 0.0f, dot = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += s[c[j]];
    for (int64_t j = 0; j < k; ++j) dot += dw[j] * s[c[j]] / sum;
    for (int64_t e = 0; e < E; ++e) dl[e] = dscores ? dscores[t * E + e] : 0.0f;  // dl holds d score first
    for (int64_t j = 0; j < k; ++j) dl[c[j]] += r.normalize ? (dw[j] - dot) / sum : dw[j];
    // then through the scores
    if (r.sigmoid) {
      for (int64_t e = 0; e < E; ++e) dl[e] *= s[e] * (1.0f - s[e]);
    } else {
      float inner = 0.0f;
      for (int64_t e = 0; e < E; ++e) inner += s[e] * dl[e];
      for (int64_t e = 0; e < E; ++e) dl[e] = s[e] * (dl[e] - inner);
    }
  }
}

}  // namespace dtrain
