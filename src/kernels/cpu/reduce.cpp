// Thread-count-independent reductions (see reduce.hpp).
#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/simd.hpp"

#include "core/bf16.hpp"

#include <algorithm>
#include <vector>

namespace dtrain {

namespace {
constexpr int64_t kRowBlock = 256;
constexpr int64_t kBlock = 1 << 14;
}  // namespace

namespace {
constexpr int64_t kColTile = 64;

// Rows [0, n) of x (row stride `stride`), the first being row `seen` of all the rows summed, added
// into `width` (at most kColTile) columns: each row block's sum in part, added to total (and part
// zeroed) when the block ends, rows and blocks in order. Summed in local arrays, which the compiler
// keeps in registers (x might alias part and total, so it would not keep those).
template <class In>
DT_SIMD void sum_tile_rows(const In* x, int64_t n, int64_t stride, int64_t width, int64_t seen, float* part_io,
                           float* total_io) {
  float part[kColTile], total[kColTile];
  std::copy(part_io, part_io + width, part);
  std::copy(total_io, total_io + width, total);
  for (int64_t r = 0; r < n;) {
    const int64_t block_end = std::min(n, r + kRowBlock - (seen + r) % kRowBlock);
    for (; r < block_end; ++r) {
      const In* row = x + r * stride;
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) part[c] += as_f32(row[c]);
    }
    if ((seen + r) % kRowBlock != 0) continue;
    for (int64_t c = 0; c < width; ++c) {
      total[c] += part[c];
      part[c] = 0.0f;
    }
  }
  std::copy(part, part + width, part_io);
  std::copy(total, total + width, total_io);
}

// Column tiles in parallel; within a tile, row blocks summed in order.
template <class In>
void colsum_accumulate_from(const In* x, float* out, int64_t rows, int64_t cols) {
  const int64_t tiles = (cols + kColTile - 1) / kColTile;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t c0 = t * kColTile, width = std::min(cols, c0 + kColTile) - c0;
    float part[kColTile] = {}, total[kColTile] = {};
    sum_tile_rows(x + c0, rows, cols, width, 0, part, total);
    for (int64_t c = 0; c < width; ++c) out[c0 + c] += rows % kRowBlock ? total[c] + part[c] : total[c];
  }
}
}  // namespace

void ColumnSums::add(const float* x, int64_t n) {
  const int64_t tiles = (cols + kColTile - 1) / kColTile;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t c0 = t * kColTile, width = std::min(cols, c0 + kColTile) - c0;
    sum_tile_rows(x + c0, n, cols, width, rows, part + c0, total + c0);
  }
  rows += n;
}

void ColumnSums::add_to(float* out) {
  const bool open_block = rows % kRowBlock != 0;
  for (int64_t c = 0; c < cols; ++c) {
    out[c] += open_block ? total[c] + part[c] : total[c];
    part[c] = total[c] = 0.0f;
  }
  rows = 0;
}

void colsum_accumulate(Operand x, float* out, int64_t rows, int64_t cols) {
  if (x.bf16)
    colsum_accumulate_from(x.b16(), out, rows, cols);
  else
    colsum_accumulate_from(x.f32(), out, rows, cols);
}

template <bool kSquare>
static double blocked_sum(const float* x, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> part(blocks);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    double s = 0;
    const int64_t e = std::min(n, (b + 1) * kBlock);
    for (int64_t i = b * kBlock; i < e; ++i) s += kSquare ? double(x[i]) * x[i] : double(x[i]);
    part[b] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

double sum_deterministic(const float* x, int64_t n) { return blocked_sum<false>(x, n); }
double sumsq_deterministic(const float* x, int64_t n) { return blocked_sum<true>(x, n); }

}  // namespace dtrain
