// The all-to-all form of context parallel (see all_to_all_attention.hpp). Layouts: a pass's qkv row
// is [q heads | k heads | v heads]; rank j's share of a row holds query heads j·H/cp.. and kv heads
// j·K/cp.. of each part. Every exchange sends each rank one block of this rank's B·T rows, so what
// arrives is [source rank][its B·T rows]: source i's rows are at the positions of its shard.
#include "parallel/cp/all_to_all_attention.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.hpp"
#include "core/phase_clock.hpp"

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

}  // namespace

void AllToAllAttention::check_heads(int64_t heads, int64_t kv_heads) const {
  const int cp = group_.size();
  if (heads % cp == 0 && kv_heads % cp == 0) return;
  throw ConfigError("parallel.cp_mode = alltoall gives each of the parallel.cp = " + std::to_string(cp) +
                    " ranks a share of the heads, and a block holds " + std::to_string(heads) + " heads and " +
                    std::to_string(kv_heads) + " key/value heads (per tensor-parallel slice), which do not divide by " +
                    std::to_string(cp) + ": use parallel.cp_mode = ring, or a cp that divides them");
}

AttentionShape AllToAllAttention::share(const AttentionShape& s) const {
  const int cp = group_.size();
  DT_ASSERT(s.H % cp == 0 && s.kv() % cp == 0);
  AttentionShape w = s;
  w.H = s.H / cp;
  w.kv_heads = s.kv() / cp;
  return w;
}

// The masks of this rank's heads among the slice's (whose first the block placed in col_offset).
DropoutSpec AllToAllAttention::heads_of(const DropoutSpec& drop, const AttentionShape& w, int64_t L) const {
  DropoutSpec d = drop;
  d.col_offset += int64_t(group_.rank()) * w.H * L * L;
  return d;
}

void AllToAllAttention::exchange(float* send, float* recv, int64_t floats_per_rank) {
  stats_.bytes += floats_per_rank * (group_.size() - 1) * int64_t(sizeof(float));
  ++stats_.transfers;
  const auto t = std::chrono::steady_clock::now();
  group_.all_to_all(send, recv, size_t(floats_per_rank), ElemType::f32);
  stats_.wait_seconds += seconds_since(t);
}

void AllToAllAttention::pack_blocks(const float* rows, const AttentionShape& w) {
  const int64_t n = w.B * w.T, block = n * 2 * w.kv() * w.Dh;
  float* kv = grown(kv_, group_.size() * block);
  for (int j = 0; j < group_.size(); ++j) dev_.kv_block_pack(rows + j * n * w.row_width(), kv + j * block, w);
}

void AllToAllAttention::forward(const float* qkv, float* out, float* saved, const AttentionShape& s,
                                const DropoutSpec& drop, const SequenceShard& sequence) {
  const int cp = group_.size();
  const AttentionShape w = share(s);
  const int64_t rows = s.B * s.T, wq = w.row_width(), wo = w.H * w.Dh, block = rows * 2 * w.kv() * w.Dh;
  float* send = grown(send_, rows * s.row_width());
  float* lse = saved + rows * s.row_width();
  for (int j = 0; j < cp; ++j) pack_share(qkv, s.row_width(), qkv_share(s, j, cp), send + j * rows * wq, rows, false);
  exchange(send, saved, rows * wq);
  pack_blocks(saved, w);
  float* o = send;  // the output of this rank's heads at every rank's positions [cp][rows][wo]
  float* st = grown(stats_rows_, 2 * w.B * w.H * w.T);
  const DropoutSpec d = heads_of(drop, w, sequence.T);
  const auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < cp; ++i) {
    const AttentionBlocks a{w, shard_of(sequence, i)};
    for (int j = 0; j < cp; ++j)
      dev_.attention_block_forward(saved + i * rows * wq, kv_.data() + j * block, shard_of(sequence, j),
                                   o + i * rows * wo, st, a, d, j == 0);
    dev_.attention_blocks_finish(o + i * rows * wo, st, lse + i * w.B * w.H * w.T, a);
  }
  stats_.attention_seconds += seconds_since(t);
  float* recv = grown(recv_, rows * s.row_width());
  exchange(o, recv, rows * wo);
  for (int j = 0; j < cp; ++j) pack_share(out, s.H * s.Dh, out_share(s, j, cp), recv + j * rows * wo, rows, true);
}

void AllToAllAttention::backward(const float* dout, const float*, const float* out, const float* saved, float* dqkv,
                                 const AttentionShape& s, const DropoutSpec& drop, const SequenceShard& sequence) {
  const int cp = group_.size();
  const AttentionShape w = share(s);
  const int64_t rows = s.B * s.T, wq = w.row_width(), wo = w.H * w.Dh, block = rows * 2 * w.kv() * w.Dh;
  const int64_t per_rank = w.B * w.H * w.T;  // a delta or lse share: [B][H/cp][T]
  const float* lse = saved + rows * s.row_width();
  float* send = grown(send_, rows * s.row_width());
  float* recv = grown(recv_, rows * s.row_width());
  // each row's delta over all heads here, then every rank's rows of this rank's heads
  float* delta = grown(delta_, 2 * cp * per_rank);
  dev_.attention_blocks_delta(dout, out, delta, AttentionBlocks{s, sequence});
  for (int j = 0; j < cp; ++j)
    for (int64_t b = 0; b < s.B; ++b)
      std::memcpy(delta + cp * per_rank + (j * s.B + b) * w.H * s.T, delta + (b * s.H + j * w.H) * s.T,
                  sizeof(float) * size_t(w.H * s.T));
  exchange(delta + cp * per_rank, delta, per_rank);
  for (int j = 0; j < cp; ++j) pack_share(dout, s.H * s.Dh, out_share(s, j, cp), send + j * rows * wo, rows, false);
  float* dout_shares = recv;
  exchange(send, dout_shares, rows * wo);
  pack_blocks(saved, w);
  float* dkv = grown(dkv_, cp * block);
  dev_.zero(dkv, sizeof(float) * size_t(cp * block));
  float* dqkv_shares = send;  // [cp][rows][wq]
  const DropoutSpec d = heads_of(drop, w, sequence.T);
  const auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < cp; ++i) {
    const AttentionBlocks a{w, shard_of(sequence, i)};
    for (int j = 0; j < cp; ++j)
      dev_.attention_block_backward(dout_shares + i * rows * wo, saved + i * rows * wq, kv_.data() + j * block,
                                    shard_of(sequence, j), lse + i * per_rank, delta + i * per_rank,
                                    dqkv_shares + i * rows * wq, dkv + j * block, a, d, j == 0);
  }
  for (int j = 0; j < cp; ++j) dev_.kv_block_unpack(dkv + j * block, dqkv_shares + j * rows * wq, w);
  stats_.attention_seconds += seconds_since(t);
  exchange(dqkv_shares, recv, rows * wq);
  for (int j = 0; j < cp; ++j) pack_share(dqkv, s.row_width(), qkv_share(s, j, cp), recv + j * rows * wq, rows, true);
}

}  // namespace dtrain
