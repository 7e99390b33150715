// Embedding kernels (see embedding.hpp). The scatter-add of backward runs in row order over
// column tiles, so it is deterministic and free of races.
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/simd.hpp"

#include <algorithm>

namespace dtrain {

DT_SIMD void embedding_forward(const int32_t* tokens, const float* wte, const float* pos, float* out,
                       int64_t B, int64_t T, int64_t d, VocabRange range) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < B * T; ++r) {
    float* o = out + r * d;
    if (!range.holds(tokens[r])) {
      if (pos) std::copy(pos + (r % T) * d, pos + (r % T + 1) * d, o);
      else std::fill(o, o + d, 0.0f);
      continue;
    }
    const float* e = wte + (int64_t(tokens[r]) - range.begin) * d;
    if (!pos) {
      std::copy(e, e + d, o);
      continue;
    }
    const float* p = pos + (r % T) * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) o[i] = e[i] + p[i];
  }
}

void embedding_backward(const int32_t* tokens, const float* dout, float* dwte, float* dpos,
                        int64_t B, int64_t T, int64_t d, VocabRange range) {
  constexpr int64_t kTile = 32;
  const int64_t tiles = (d + kTile - 1) / kTile;
#pragma omp parallel for schedule(static)
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t c0 = tile * kTile, c1 = std::min(d, c0 + kTile);
    for (int64_t r = 0; r < B * T; ++r) {
      const float* g = dout + r * d;
      if (range.holds(tokens[r])) {
        float* e = dwte + (int64_t(tokens[r]) - range.begin) * d;
        for (int64_t i = c0; i < c1; ++i) e[i] += g[i];
      }
      if (dpos) {
        float* p = dpos + (r % T) * d;
        for (int64_t i = c0; i < c1; ++i) p[i] += g[i];
      }
    }
  }
}

}  // namespace dtrain
