// The all-to-all form of context parallel (see all_to_all_attention.hpp). Layouts: a pass's qkv row
// is [q heads | k heads | v heads]; rank j's share of a row holds query heads j·H/cp.. and kv heads
// j·K/cp.. of each part. Every exchange sends each rank one block of this rank's B·T rows.
#include "parallel/cp/all_to_all_attention.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.hpp"

namespace dtrain {

namespace {

// Column runs of a row that belong to head share j: (first column, width) of each part.
struct Share {
  int64_t at[3], width[3];
  int parts;
};

Share qkv_share(const AttentionShape& s, int j, int cp) {
  const int64_t hq = s.H / cp * s.Dh, hk = s.kv() / cp * s.Dh, q = s.H * s.Dh, k = s.kv() * s.Dh;
  return {{j * hq, q + j * hk, q + k + j * hk}, {hq, hk, hk}, 3};
}

Share out_share(const AttentionShape& s, int j, int cp) {
  const int64_t h = s.H / cp * s.Dh;
  return {{j * h, 0, 0}, {h, 0, 0}, 1};
}

int64_t share_width(const Share& sh) {
  int64_t w = 0;
  for (int p = 0; p < sh.parts; ++p) w += sh.width[p];
  return w;
}

// Row r (of B·T local rows) of share j of `local` [rows, full] ↔ packed row r of width share_width.
void pack_share(const float* local, int64_t full, const Share& sh, float* packed, int64_t rows, bool unpack) {
  const int64_t w = share_width(sh);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = 0;
    for (int p = 0; p < sh.parts; ++p) {
      float* a = packed + r * w + at;
      float* b = const_cast<float*>(local) + r * full + sh.at[p];
      if (unpack) std::memcpy(b, a, sizeof(float) * size_t(sh.width[p]));
      else std::memcpy(a, b, sizeof(float) * size_t(sh.width[p]));
      at += sh.width[p];
    }
  }
}

// Local row (b, t) of rank j's positions ↔ row (b, position) of the whole sequences [B, L, w].
void place_rows(float* whole, const float* part, const SequenceShard& s, int64_t B, int64_t T, int64_t w, bool back) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      float* g = whole + (b * s.T + s.position(t)) * w;
      float* l = const_cast<float*>(part) + (b * T + t) * w;
      if (back) std::memcpy(l, g, sizeof(float) * size_t(w));
      else std::memcpy(g, l, sizeof(float) * size_t(w));
    }
}

SequenceShard shard_of(const SequenceShard& mine, int j, int cp) {
  SequenceShard s = mine;
  s.first = int64_t(j) * s.chunk;
  s.second = int64_t(2 * cp - 1 - j) * s.chunk;
  return s;
}

}  // namespace

void AllToAllAttention::check_heads(int64_t heads, int64_t kv_heads) const {
  const int cp = group_.size();
  if (heads % cp == 0 && kv_heads % cp == 0) return;
  throw ConfigError("parallel.cp_mode = alltoall gives each of the parallel.cp = " + std::to_string(cp) +
                    " ranks a share of the heads, and a block holds " + std::to_string(heads) + " heads and " +
                    std::to_string(kv_heads) + " key/value heads (per tensor-parallel slice), which do not divide by " +
                    std::to_string(cp) + ": use parallel.cp_mode = ring, or a cp that divides them");
}

AttentionShape AllToAllAttention::whole(const AttentionShape& s, const SequenceShard& sequence) const {
  const int cp = group_.size();
  DT_ASSERT(s.H % cp == 0 && s.kv() % cp == 0);
  AttentionShape w = s;
  w.T = sequence.T;
  w.H = s.H / cp;
  w.kv_heads = s.kv() / cp;
  return w;
}

DropoutSpec AllToAllAttention::heads_of(const DropoutSpec& drop, const AttentionShape& w) const {
  DropoutSpec d = drop;
  d.col_offset += int64_t(group_.rank()) * w.H * w.T * w.T;
  return d;
}

float* AllToAllAttention::buffer(std::vector<float>& v, int64_t floats) {
  if (int64_t(v.size()) < floats) v.resize(size_t(floats));
  return v.data();
}

void AllToAllAttention::exchange(float* send, float* recv, int64_t floats_per_rank) {
  stats_.bytes += floats_per_rank * (group_.size() - 1) * int64_t(sizeof(float));
  ++stats_.transfers;
  const auto t = std::chrono::steady_clock::now();
  group_.all_to_all(send, recv, size_t(floats_per_rank), ElemType::f32);
  stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void AllToAllAttention::forward(const float* qkv, float* out, float* saved, const AttentionShape& s,
                                const DropoutSpec& drop, const SequenceShard& sequence) {
  const int cp = group_.size();
  const AttentionShape w = whole(s, sequence);
  const int64_t rows = s.B * s.T, wq = w.row_width(), wo = w.H * w.Dh;
  float* send = buffer(send_, rows * s.row_width());
  float* recv = buffer(recv_, rows * s.row_width());
  for (int j = 0; j < cp; ++j) pack_share(qkv, s.row_width(), qkv_share(s, j, cp), send + j * rows * wq, rows, false);
  exchange(send, recv, rows * wq);
  for (int j = 0; j < cp; ++j) place_rows(saved, recv + j * rows * wq, shard_of(sequence, j, cp), s.B, s.T, wq, false);
  float* o = buffer(whole_out_, rows * cp * wo);
  const auto t = std::chrono::steady_clock::now();
  dev_.attention_forward(saved, o, buffer(probs_, w.B * w.H * w.T * w.T), w, heads_of(drop, w));
  stats_.attention_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  for (int j = 0; j < cp; ++j) place_rows(o, send + j * rows * wo, shard_of(sequence, j, cp), s.B, s.T, wo, true);
  exchange(send, recv, rows * wo);
  for (int j = 0; j < cp; ++j) pack_share(out, s.H * s.Dh, out_share(s, j, cp), recv + j * rows * wo, rows, true);
}

void AllToAllAttention::backward(const float* dout, const float*, const float*, const float* saved, float* dqkv,
                                 const AttentionShape& s, const DropoutSpec& drop, const SequenceShard& sequence) {
  const int cp = group_.size();
  const AttentionShape w = whole(s, sequence);
  const int64_t rows = s.B * s.T, wq = w.row_width(), wo = w.H * w.Dh;
  float* send = buffer(send_, rows * s.row_width());
  float* recv = buffer(recv_, rows * s.row_width());
  for (int j = 0; j < cp; ++j) pack_share(dout, s.H * s.Dh, out_share(s, j, cp), send + j * rows * wo, rows, false);
  exchange(send, recv, rows * wo);
  float* dout_whole = buffer(whole_out_, rows * cp * wq);  // (holds the output's gradient, then qkv's)
  for (int j = 0; j < cp; ++j) place_rows(dout_whole, recv + j * rows * wo, shard_of(sequence, j, cp), s.B, s.T, wo, false);
  float* probs = buffer(probs_, w.B * w.H * w.T * w.T);
  float* dqkv_whole = buffer(recv_, rows * s.row_width());  // recv_ is spent: its rows were placed
  const DropoutSpec d = heads_of(drop, w);
  const auto t = std::chrono::steady_clock::now();
  dev_.attention_forward(saved, nullptr, probs, w, d);  // the probabilities again
  dev_.attention_backward(dout_whole, saved, probs, dqkv_whole, w, d);
  stats_.attention_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  for (int j = 0; j < cp; ++j) place_rows(dqkv_whole, send + j * rows * wq, shard_of(sequence, j, cp), s.B, s.T, wq, true);
  exchange(send, recv, rows * wq);
  for (int j = 0; j < cp; ++j) pack_share(dqkv, s.row_width(), qkv_share(s, j, cp), recv + j * rows * wq, rows, true);
}

}  // namespace dtrain
