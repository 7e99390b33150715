// Ring attention's block kernels (see attention_blocks.hpp). A block's rows are at most two runs of
// positions (SequenceShard), and so are the queries': the work goes per (query run, key run) pair,
// each pair a flash-attention step. Under the causal mask a pair whose keys all follow its queries is
// skipped, one whose keys all precede them is unmasked, and only a pair the diagonal crosses is masked.
// The products run as batched matmuls over strided views (as in attention.cpp); the running softmax,
// mask and dropout are row kernels in between.
#include "kernels/cpu/attention_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {

namespace {

constexpr float kNoMax = -std::numeric_limits<float>::infinity();  // a row's m before any key
constexpr int64_t kPiece = 1024;  // dropout mask elements drawn at a time (on the stack)

struct Run {
  int64_t at, len, pos;  // local rows [at, at + len) hold positions pos, pos + 1, ...
};

struct Pair {
  Run q, k;
  bool masked;  // the causal diagonal crosses the pair
};

int runs_of(const SequenceShard& sh, int64_t T, Run r[2]) {
  if (!sh.active()) {
    r[0] = {0, T, 0};
    return 1;
  }
  DT_ASSERT(2 * sh.chunk == T);
  r[0] = {0, sh.chunk, sh.first};
  r[1] = {sh.chunk, sh.chunk, sh.second};
  return 2;
}

// The pairs with work (at most 4).
int block_pairs(const AttentionBlocks& a, const SequenceShard& keys, Pair p[4]) {
  Run qr[2], kr[2];
  const int nq = runs_of(a.queries, a.shape.T, qr), nk = runs_of(keys, a.shape.T, kr);
  int n = 0;
  for (int i = 0; i < nq; ++i)
    for (int j = 0; j < nk; ++j) {
      const Run &q = qr[i], &k = kr[j];
      if (q.len == 0 || k.len == 0) continue;
      const bool all_after = k.pos > q.pos + q.len - 1, all_before = k.pos + k.len - 1 <= q.pos;
      if (a.shape.causal && all_after) continue;
      p[n++] = {q, k, a.shape.causal && !all_before};
    }
  return n;
}

// How many keys of the pair the query at position qi sees: a prefix of the key run.
inline int64_t visible(const Pair& p, int64_t qi) {
  if (!p.masked) return p.k.len;
  return std::clamp<int64_t>(qi - p.k.pos + 1, 0, p.k.len);
}

// The whole sequence's length, which keys the dropout masks.
int64_t mask_length(const AttentionBlocks& a, const SequenceShard& keys) {
  const AttentionShape& s = a.shape;
  DT_ASSERT(s.kv() > 0 && s.kv() <= s.H && s.H % s.kv() == 0);
  const int64_t L = a.queries.global_length(s.T);
  DT_ASSERT(keys.global_length(s.T) == L);
  return L;
}

// Strided views of a pair, batched over (B, K) as attention.cpp's: query head kv*G + g pairs with kv
// head kv; member g of a group is offset by g*Dh in q, out and dqkv, by g*qk in the scores [B, H, ql, kl].
struct PairViews {
  Strided4 q, k, kt, o, s, st;  // q: qkv and dqkv; k: kv and dkv (k and v halves); o: out and dout
  int64_t q_at, o_at, k_at, v_at, qk;
};

PairViews pair_views(const AttentionShape& s, const Pair& p) {
  const int64_t T = s.T, Dh = s.Dh, G = s.group(), d = s.H * Dh, row = s.row_width(), kvw = 2 * s.kv() * Dh;
  const int64_t qk = p.q.len * p.k.len;
  PairViews w;
  w.q = {{T * row, G * Dh, row, 1}};
  w.k = {{T * kvw, Dh, kvw, 1}};
  w.kt = {{T * kvw, Dh, 1, kvw}};
  w.o = {{T * d, G * Dh, d, 1}};
  w.s = {{s.H * qk, G * qk, p.k.len, 1}};
  w.st = {{s.H * qk, G * qk, 1, p.k.len}};
  w.q_at = p.q.at * row;
  w.o_at = p.q.at * d;
  w.k_at = p.k.at * kvw;
  w.v_at = w.k_at + s.kv() * Dh;
  w.qk = qk;
  return w;
}

// Scores of the largest pair: what a block's scratch holds.
int64_t scores_size(const AttentionShape& s, const Pair* p, int n) {
  int64_t most = 0;
  for (int i = 0; i < n; ++i) most = std::max(most, p[i].q.len * p[i].k.len);
  return s.B * s.H * most;
}

// x[0, n) *= the dropout mask · scale of elements first, first + 1, ... of sample b's stream.
void drop_row(float* x, int64_t n, const DropoutSpec& drop, int64_t b, int64_t first) {
  dropout_scale_run(drop.stream(b), drop.threshold(), drop.scale(), first, n, x, x);
}

// m = -inf, l = 0, out = 0 for every row.
void start_state(float* out, float* stats, const AttentionShape& s) {
  const int64_t d = s.H * s.Dh;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * s.T; ++r) std::memset(out + r * d, 0, sizeof(float) * d);
  for (int64_t r = 0; r < s.B * s.H * s.T; ++r) {
    stats[2 * r] = kNoMax;
    stats[2 * r + 1] = 0.0f;
  }
}

// The pair's scores S [B, H, ql, kl] become drop(exp(S - m_new)) (0 where masked); each row's m, l
// and out row are brought to the new maximum. Rows with no visible key keep their state.
DT_SIMD void forward_rows(float* S, float* out, float* stats, const Pair& p, const AttentionBlocks& a,
                          const DropoutSpec& drop, int64_t L) {
  const AttentionShape& s = a.shape;
  const int64_t H = s.H, T = s.T, Dh = s.Dh, ql = p.q.len, kl = p.k.len;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * H * ql; ++r) {
    const int64_t i = r % ql, bh = r / ql, b = bh / H, h = bh % H, qi = p.q.pos + i, n = visible(p, qi);
    float* sr = S + r * kl;
    for (int64_t j = n; j < kl; ++j) sr[j] = 0.0f;
    if (n == 0) continue;
    float* st = stats + 2 * (bh * T + p.q.at + i);
    float mx = st[0];
    for (int64_t j = 0; j < n; ++j) mx = sr[j] > mx ? sr[j] : mx;
    const float alpha = st[0] == kNoMax ? 0.0f : fast_exp(st[0] - mx);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      sr[j] = fast_exp(sr[j] - mx);
      sum += sr[j];
    }
    st[0] = mx;
    st[1] = st[1] * alpha + sum;
    if (drop.active()) drop_row(sr, n, drop, b, drop.col_offset + (h * L + qi) * L + p.k.pos);
    float* o = out + (b * T + p.q.at + i) * H * Dh + h * Dh;
#pragma omp simd
    for (int64_t c = 0; c < Dh; ++c) o[c] *= alpha;
  }
}

// In place on the pair's rows: P (holding the scores) becomes Pd = drop(exp(S - lse)), dP (holding
// dPd = dO·Vᵀ) becomes dS = P ∘ (drop(dPd) − delta); both 0 where masked.
DT_SIMD void backward_rows(float* P, float* dP, const float* lse, const float* delta, const Pair& p,
                           const AttentionBlocks& a, const DropoutSpec& drop, int64_t L) {
  const AttentionShape& s = a.shape;
  const int64_t H = s.H, T = s.T, ql = p.q.len, kl = p.k.len;
  const bool dropping = drop.active();
  const float scale = drop.scale();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * H * ql; ++r) {
    const int64_t i = r % ql, bh = r / ql, b = bh / H, h = bh % H, qi = p.q.pos + i, n = visible(p, qi);
    const int64_t t = bh * T + p.q.at + i, first = drop.col_offset + (h * L + qi) * L + p.k.pos;
    const float m = lse[t], dl = delta[t];
    float *pr = P + r * kl, *gr = dP + r * kl;
    const RandomStream st = drop.stream(b);
    uint8_t keep[kPiece];
    for (int64_t j0 = 0; j0 < n; j0 += kPiece) {
      const int64_t len = std::min(kPiece, n - j0);
      if (dropping) dropout_mask(st, drop.threshold(), first + j0, len, keep);
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) {
        const float e = fast_exp(pr[j0 + j] - m), f = dropping ? (keep[j] ? scale : 0.0f) : 1.0f;
        pr[j0 + j] = e * f;
        gr[j0 + j] = e * (gr[j0 + j] * f - dl);
      }
    }
    for (int64_t j = n; j < kl; ++j) pr[j] = gr[j] = 0.0f;
  }
}

}  // namespace

int64_t attention_block_scores_floats(const AttentionBlocks& a, const SequenceShard& keys) {
  Pair pairs[4];
  const int np = block_pairs(a, keys, pairs);
  return scores_size(a.shape, pairs, np);
}

void kv_block_pack(const float* qkv, float* kv, const AttentionShape& s) {
  const int64_t d = s.H * s.Dh, kvw = 2 * s.kv() * s.Dh, row = s.row_width();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * s.T; ++r) std::memcpy(kv + r * kvw, qkv + r * row + d, sizeof(float) * kvw);
}

void kv_block_unpack(const float* dkv, float* dqkv, const AttentionShape& s) {
  const int64_t d = s.H * s.Dh, kvw = 2 * s.kv() * s.Dh, row = s.row_width();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * s.T; ++r) std::memcpy(dqkv + r * row + d, dkv + r * kvw, sizeof(float) * kvw);
}

void attention_block_forward(const float* qkv, const float* kv, const SequenceShard& keys, float* out, float* stats,
                             const AttentionBlocks& a, const DropoutSpec& drop, bool first) {
  const AttentionShape& s = a.shape;
  const int64_t L = mask_length(a, keys), K = s.kv(), G = s.group(), Dh = s.Dh;
  if (first) start_state(out, stats, s);
  Pair pairs[4];
  const int np = block_pairs(a, keys, pairs);
  float* S = scratch(ScratchSlot::attention, attention_block_scores_floats(a, keys));
  const float scale = 1.0f / std::sqrt(float(Dh));
  for (int i = 0; i < np; ++i) {
    const Pair& p = pairs[i];
    const PairViews w = pair_views(s, p);
    const int64_t ql = p.q.len, kl = p.k.len;
    for (int64_t g = 0; g < G; ++g)  // S = scale·Q·Kᵀ
      matmul_batched(qkv + w.q_at + g * Dh, w.q, kv + w.k_at, w.kt, S + g * w.qk, w.s, s.B, K, ql, kl, Dh, scale);
    forward_rows(S, out, stats, p, a, drop, L);
    for (int64_t g = 0; g < G; ++g)  // out += Pd·V
      matmul_batched(S + g * w.qk, w.s, kv + w.v_at, w.k, out + w.o_at + g * Dh, w.o, s.B, K, ql, Dh, kl, 1.0f, true);
  }
}

void attention_blocks_finish(float* out, const float* stats, float* lse, const AttentionBlocks& a) {
  const AttentionShape& s = a.shape;
  const int64_t H = s.H, T = s.T, Dh = s.Dh;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * H * T; ++r) {
    const int64_t b = r / (H * T), h = (r / T) % H, t = r % T;
    const float m = stats[2 * r], l = stats[2 * r + 1];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    lse[r] = l > 0.0f ? m + std::log(l) : std::numeric_limits<float>::infinity();
    float* o = out + (b * T + t) * H * Dh + h * Dh;
    for (int64_t c = 0; c < Dh; ++c) o[c] *= inv;
  }
}

void attention_blocks_delta(const float* dout, const float* out, float* delta, const AttentionBlocks& a) {
  const AttentionShape& s = a.shape;
  const int64_t H = s.H, T = s.T, Dh = s.Dh;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * H * T; ++r) {
    const int64_t b = r / (H * T), h = (r / T) % H, t = r % T, at = (b * T + t) * H * Dh + h * Dh;
    float sum = 0.0f;
    for (int64_t c = 0; c < Dh; ++c) sum += dout[at + c] * out[at + c];
    delta[r] = sum;
  }
}

void attention_block_backward(const float* dout, const float* qkv, const float* kv, const SequenceShard& keys,
                              const float* lse, const float* delta, float* dqkv, float* dkv, const AttentionBlocks& a,
                              const DropoutSpec& drop, bool first) {
  const AttentionShape& s = a.shape;
  const int64_t L = mask_length(a, keys), K = s.kv(), G = s.group(), Dh = s.Dh, row = s.row_width();
  if (first) {  // dQ starts at 0 (rows no pair reaches included), then every pair adds
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < s.B * s.T; ++r) std::memset(dqkv + r * row, 0, sizeof(float) * s.H * Dh);
  }
  Pair pairs[4];
  const int np = block_pairs(a, keys, pairs);
  const int64_t n = attention_block_scores_floats(a, keys);
  float *P = scratch(ScratchSlot::attention, n), *dP = scratch(ScratchSlot::attention_grad, n);
  const float scale = 1.0f / std::sqrt(float(Dh));
  for (int i = 0; i < np; ++i) {
    const Pair& p = pairs[i];
    const PairViews w = pair_views(s, p);
    const int64_t ql = p.q.len, kl = p.k.len, B = s.B;
    for (int64_t g = 0; g < G; ++g) {
      const float* q = qkv + w.q_at + g * Dh;
      matmul_batched(q, w.q, kv + w.k_at, w.kt, P + g * w.qk, w.s, B, K, ql, kl, Dh, scale);  // S
      matmul_batched(dout + w.o_at + g * Dh, w.o, kv + w.v_at, w.kt, dP + g * w.qk, w.s, B, K, ql, kl, Dh,
                     1.0f);  // dPd = dO·Vᵀ
    }
    backward_rows(P, dP, lse, delta, p, a, drop, L);
    for (int64_t g = 0; g < G; ++g) {
      const float *q = qkv + w.q_at + g * Dh, *Pd = P + g * w.qk, *dS = dP + g * w.qk;
      matmul_batched(Pd, w.st, dout + w.o_at + g * Dh, w.o, dkv + w.v_at, w.k, B, K, kl, Dh, ql, 1.0f, true);  // dV
      matmul_batched(dS, w.s, kv + w.k_at, w.k, dqkv + w.q_at + g * Dh, w.q, B, K, ql, Dh, kl, scale, true);   // dQ
      matmul_batched(dS, w.st, q, w.q, dkv + w.k_at, w.k, B, K, kl, Dh, ql, scale, true);                      // dK
    }
  }
}

}  // namespace dtrain
