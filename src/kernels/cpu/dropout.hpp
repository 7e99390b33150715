// Dropout with counter-based masks: the mask of element e of global sample s at (step, unit, site)
// is a pure function of those numbers, so forward and backward regenerate it instead of storing it,
// and every thread count, rank count and parallel layout draws the same mask.
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
  bool active() const { return p > 0.0f; }
  uint32_t threshold() const { return uint32_t(double(p) * 65536.0 + 0.5); }
  float scale() const { return 65536.0f / float(65536u - threshold()); }
  RandomStream stream(int64_t sample) const {
    return dropout_stream(seed, step, unit, site, uint32_t(sample_offset + sample * sample_stride));
  }
};

// Fills keep[0..n) with the mask of elements [first, first+n) of `stream` (1 keep, 0 drop).
void dropout_mask(const RandomStream& stream, uint32_t threshold, int64_t first, int64_t n, uint8_t* keep);

// y = x * mask * scale on a [samples, per_sample] activation (in place allowed).
void dropout_forward(const float* x, float* y, int64_t samples, int64_t per_sample, const DropoutSpec& s);
// dx = dy * mask * scale (in place allowed).
void dropout_backward(const float* dy, float* dx, int64_t samples, int64_t per_sample, const DropoutSpec& s);

}  // namespace dtrain
