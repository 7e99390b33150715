// Dropout kernels (see dropout.hpp): masks drawn 16 bits per element from Philox blocks.
#include "kernels/cpu/dropout.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {

namespace {
constexpr int kLanes = 16;

// Philox4x32-10 on kLanes consecutive blocks at once (vectorises); out[w][lane].
inline void philox_lanes(uint64_t first_block, const RandomStream& st, uint32_t out[4][kLanes]) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t blk = first_block + uint64_t(l);
    c0[l] = uint32_t(blk);
    c1[l] = uint32_t(blk >> 32) ^ st.a;
    c2[l] = st.b;
    c3[l] = st.c;
  }
  uint32_t k0 = uint32_t(st.seed), k1 = uint32_t(st.seed >> 32);
  for (int r = 0; r < 10; ++r) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t p0 = uint64_t(M0) * c0[l], p1 = uint64_t(M1) * c2[l];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[l] ^ k0, n2 = uint32_t(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = uint32_t(p1);
      c3[l] = uint32_t(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
    k0 += W0;
    k1 += W1;
  }
  for (int l = 0; l < kLanes; ++l) {
    out[0][l] = c0[l];
    out[1][l] = c1[l];
    out[2][l] = c2[l];
    out[3][l] = c3[l];
  }
}
}  // namespace

// Element e uses half (e & 1) of word ((e >> 1) & 3) of Philox block (e >> 3): 8 per block,
// generated kLanes blocks (128 elements) at a time.
DT_SIMD void dropout_mask(const RandomStream& st, uint32_t threshold, int64_t first, int64_t n, uint8_t* keep) {
  constexpr int64_t kGroup = 8 * kLanes;
  const int64_t end = first + n;
  uint32_t w[4][kLanes];
  uint8_t tmp[kGroup];
  for (int64_t g = first / kGroup; g * kGroup < end; ++g) {
    philox_lanes(uint64_t(g) * kLanes, st, w);
    for (int l = 0; l < kLanes; ++l)
      for (int j = 0; j < 8; ++j) tmp[l * 8 + j] = ((w[j >> 1][l] >> ((j & 1) * 16)) & 0xffffu) >= threshold;
    const int64_t lo = std::max(first, g * kGroup), hi = std::min(end, (g + 1) * kGroup);
    std::memcpy(keep + (lo - first), tmp + (lo - g * kGroup), size_t(hi - lo));
  }
}

namespace {
// Calls apply(local offset, n, keep) over the tile in pieces of at most kChunk elements, each within
// one sample's contiguous run: where the tile has whole rows (cols == global cols) consecutive rows
// of a sample are one run (context parallel: of one of the shard's runs of positions), otherwise
// each row is one.
template <class F>
void for_each_masked(int64_t rows, int64_t cols, const DropoutSpec& s, F&& apply) {
  constexpr int64_t kChunk = 4096;
  const int64_t gcols = s.global_cols > 0 ? s.global_cols : cols, rps = s.rows_per_sample;
  const bool whole_rows = gcols == cols;
  // runs: [first local row, rows in run); with whole rows, split at sample boundaries (and at the
  // shard's runs of positions, which divide a sample's rows in two)
  const int64_t run_rows = s.sequence.active() ? s.sequence.chunk : rps;
  DT_ASSERT(!s.sequence.active() || rps == 2 * s.sequence.chunk);
  const int64_t g0 = s.row_offset, g1 = s.row_offset + rows;
  const int64_t runs = whole_rows ? (g1 - 1) / run_rows - g0 / run_rows + 1 : rows;
  const int64_t run_elems = whole_rows ? run_rows * cols : cols;
  const int64_t chunks = (run_elems + kChunk - 1) / kChunk;
  const uint32_t thr = s.threshold();
#pragma omp parallel for schedule(static)
  for (int64_t job = 0; job < runs * chunks; ++job) {
    const int64_t run = job / chunks, c = job % chunks;
    int64_t first_row, nrows;  // whole rows g of this run
    if (whole_rows) {
      const int64_t run_first = (g0 / run_rows + run) * run_rows;
      first_row = std::max(g0, run_first);
      nrows = std::min(g1, run_first + run_rows) - first_row;
    } else {
      first_row = g0 + run;
      nrows = 1;
    }
    const int64_t len = nrows * cols, from = c * kChunk;
    if (from >= len) continue;
    const int64_t n = std::min(kChunk, len - from);
    const int64_t elem = s.sequence.position(first_row % rps) * gcols + s.col_offset + from;
    uint8_t keep[kChunk];
    dropout_mask(s.stream(first_row / rps), thr, elem, n, keep);
    apply((first_row - g0) * cols + from, n, keep);
  }
}
}  // namespace

DT_SIMD void dropout_forward(const float* x, float* y, int64_t rows, int64_t cols, const DropoutSpec& s) {
  if (!s.active()) {
    if (x != y) std::memcpy(y, x, sizeof(float) * rows * cols);
    return;
  }
  const float scale = s.scale();
  for_each_masked(rows, cols, s, [&](int64_t off, int64_t n, const uint8_t* keep) {
    for (int64_t i = 0; i < n; ++i) y[off + i] = keep[i] ? x[off + i] * scale : 0.0f;
  });
}

void dropout_backward(const float* dy, float* dx, int64_t rows, int64_t cols, const DropoutSpec& s) {
  dropout_forward(dy, dx, rows, cols, s);  // same mask, same scale
}

}  // namespace dtrain
