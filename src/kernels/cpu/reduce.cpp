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
template <class In>
DT_SIMD void colsum_accumulate_from(const In* x, float* out, int64_t rows, int64_t cols) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  // Column tiles in parallel; within a tile, row blocks summed in order.
  constexpr int64_t kColTile = 64;
  const int64_t tiles = (cols + kColTile - 1) / kColTile;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t c0 = t * kColTile, c1 = std::min(cols, c0 + kColTile);
    float total[kColTile] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      float part[kColTile] = {};
      const int64_t r1 = std::min(rows, (b + 1) * kRowBlock);
      for (int64_t r = b * kRowBlock; r < r1; ++r) {
        const In* row = x + r * cols;
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) part[c - c0] += as_f32(row[c]);
      }
      for (int64_t c = c0; c < c1; ++c) total[c - c0] += part[c - c0];
    }
    for (int64_t c = c0; c < c1; ++c) out[c] += total[c - c0];
  }
}
}  // namespace

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
