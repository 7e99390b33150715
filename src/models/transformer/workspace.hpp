// What the Transformer's units share: their dropout sites, and the activation-gradient and
// gathered-row buffers one unit's call uses, carved from the model's scratch (one unit runs at a
// time). Under tensor parallelism 3d and ff are this slice's widths.
#pragma once
#include <cstdint>

#include "models/transformer/config.hpp"
#include "nn/embed_head_shape.hpp"
#include "nn/unit.hpp"

namespace dtrain {

// Dropout sites within a unit (keys of the masks, with the unit and the global coordinates); the
// embedding's is nn/embed_head_shape.hpp's kEmbeddingDropSite.
enum DropSite : uint32_t { kDropEmbed = 0, kDropAttnProbs = 1, kDropAttnOut = 2, kDropFfAct = 3, kDropFfOut = 4 };
static_assert(kDropEmbed == kEmbeddingDropSite);

struct Workspace {
  float* tmp1;      // [rows, d]
  float* tmp2;      // [rows, d]
  float* grad_qkv;  // [rows, 3d]
  float* ff_act;    // [rows, ff] activation output (recomputed in backward)
  float* grad_ff;   // [rows, ff]
  float* full1;     // [rows, d] tensor parallel only: gathered rows, partial sums
  float* full2;     // [rows, d]
  float* probs;     // [rows, heads, seq_len] recompute = selective only: the attention probabilities
};

// The workspace for up to `rows` rows carved from `scratch` (null: only counting), and its floats.
inline int64_t carve_workspace(const TransformerConfig& c, const TpSlice& slice, int64_t rows, float* scratch,
                               Workspace* ws, bool selective = false) {
  const int64_t d = c.dim, dl = d / slice.count, ffl = c.ff_dim / slice.count;
  const bool cut = slice.count > 1;
  int64_t at = 0;
  auto take = [&](int64_t n) -> float* {
    float* p = scratch ? scratch + at : nullptr;
    at += (n + 15) / 16 * 16;  // 64-byte aligned, as the arena hands out
    return p;
  };
  Workspace w{take(rows * d),   take(rows * d),   take(rows * 3 * dl), take(rows * ffl), take(rows * ffl),
              cut ? take(rows * d) : nullptr, cut ? take(rows * d) : nullptr,
              selective ? take(rows * (c.heads / slice.count) * c.seq_len) : nullptr};
  if (ws) *ws = w;
  return at;
}

}  // namespace dtrain
