// Dropout with counter-based masks: the mask of element e of global sample s at (step, unit, site)
// is a pure function of those numbers, so forward and backward regenerate it instead of storing it,
// and every thread count, rank count and parallel layout draws the same mask. A kernel call sees a
// tile of the whole activation (some of its rows, some of its columns): the spec's geometry says
// where the tile stands, so a tensor- or sequence-parallel slice draws its part of the same mask.
#pragma once
#include <cstdint>

#include "core/philox.hpp"

namespace dtrain {

struct DropoutSpec {
  float p = 0.0f;  // drop probability (resolution 1/65536); 0 = off
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t unit = 0;
  uint32_t site = 0;
  int64_t sample_offset = 0;  // global index of this batch's first row's sample
  int64_t sample_stride = 1;  // row b is global sample sample_offset + b * sample_stride
  // Geometry of the [rows, cols] tile a kernel is given within the whole [R, global_cols] activation:
  // whole row g = row_offset + local row is row g % rows_per_sample of sample g / rows_per_sample,
  // and local column c is column col_offset + c. The element index keyed is
  // (g % rows_per_sample) * global_cols + col_offset + c. Defaults: each row one whole sample.
  int64_t rows_per_sample = 1;
  int64_t row_offset = 0;   // sequence parallel: this slice's first row
  int64_t global_cols = 0;  // 0: the tile's own cols
  int64_t col_offset = 0;   // tensor parallel: this slice's first column
  bool active() const { return p > 0.0f; }
  uint32_t threshold() const { return uint32_t(double(p) * 65536.0 + 0.5); }
  float scale() const { return 65536.0f / float(65536u - threshold()); }
  RandomStream stream(int64_t sample) const {
    return dropout_stream(seed, step, unit, site, uint32_t(sample_offset + sample * sample_stride));
  }
};

// Fills keep[0..n) with the mask of elements [first, first+n) of `stream` (1 keep, 0 drop).
void dropout_mask(const RandomStream& stream, uint32_t threshold, int64_t first, int64_t n, uint8_t* keep);

// y = x * mask * scale on a [rows, cols] tile (in place allowed); see DropoutSpec's geometry.
void dropout_forward(const float* x, float* y, int64_t rows, int64_t cols, const DropoutSpec& s);
// dx = dy * mask * scale (in place allowed).
void dropout_backward(const float* dy, float* dx, int64_t rows, int64_t cols, const DropoutSpec& s);

}  // namespace dtrain
