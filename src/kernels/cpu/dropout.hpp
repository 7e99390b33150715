// Dropout on the CPU, with the counter-based masks and tile geometry of DropoutSpec (kernels/types.hpp).
// Element e of a stream is kept when half (e & 1) of word ((e >> 1) & 3) of Philox block e >> 3,
// as a 16-bit number, is at least the threshold.
#pragma once
#include <cstdint>

#include "core/philox.hpp"
#include "kernels/types.hpp"

namespace dtrain {

// Which code draws the masks: the fastest this CPU has (AVX-512 intrinsics where it has them), or
// the portable loop (tests check that both give the same bits).
enum class MaskKernel { best, portable };
// Whether MaskKernel::best is the AVX-512 one on this CPU.
bool dropout_vectorised();

// Fills keep[0..n) with the mask of elements [first, first+n) of `stream` (1 keep, 0 drop).
void dropout_mask(const RandomStream& stream, uint32_t threshold, int64_t first, int64_t n, uint8_t* keep,
                  MaskKernel k = MaskKernel::best);
// y[i] = x[i] * scale where element first + i of `stream` is kept, else 0, for i < n (in place allowed).
void dropout_scale_run(const RandomStream& stream, uint32_t threshold, float scale, int64_t first, int64_t n,
                       const float* x, float* y, MaskKernel k = MaskKernel::best);

// y = x * mask * scale on a [rows, cols] tile (in place allowed in f32); see DropoutSpec's geometry. y
// stored in bf16 (not over x): the f32 result rounded to nearest even (written also when dropout is off).
void dropout_forward(const float* x, ActBuffer y, int64_t rows, int64_t cols, const DropoutSpec& s);
// The same from x stored in bf16 into y in bf16 (not in place): each value widened, scaled and
// rounded again (a dropped-out copy of probabilities kept in bf16; dropout off: a copy).
void dropout_forward(const uint16_t* x, uint16_t* y, int64_t rows, int64_t cols, const DropoutSpec& s);
// dx = dy * mask * scale (in place allowed).
void dropout_backward(const float* dy, float* dx, int64_t rows, int64_t cols, const DropoutSpec& s);

}  // namespace dtrain
