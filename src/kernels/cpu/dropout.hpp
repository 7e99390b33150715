// Dropout on the CPU, with the counter-based masks and tile geometry of DropoutSpec (kernels/types.hpp).
#pragma once
#include <cstdint>

#include "core/philox.hpp"
#include "kernels/types.hpp"

namespace dtrain {

// Fills keep[0..n) with the mask of elements [first, first+n) of `stream` (1 keep, 0 drop).
void dropout_mask(const RandomStream& stream, uint32_t threshold, int64_t first, int64_t n, uint8_t* keep);

// y = x * mask * scale on a [rows, cols] tile (in place allowed); see DropoutSpec's geometry.
void dropout_forward(const float* x, float* y, int64_t rows, int64_t cols, const DropoutSpec& s);
// dx = dy * mask * scale (in place allowed).
void dropout_backward(const float* dy, float* dx, int64_t rows, int64_t cols, const DropoutSpec& s);

}  // namespace dtrain
