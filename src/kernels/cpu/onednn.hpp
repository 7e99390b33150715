// What the kernels that call oneDNN share (matmul, convolution, pooling): the process's CPU engine
// and stream, its out-of-memory error made dtrain's, and f32 → bf16 rounding into a reused buffer.
#pragma once
#include <bit>
#include <cstdint>
#include <dnnl.hpp>
#include <vector>

namespace dtrain {

dnnl::engine& onednn_engine();
dnnl::stream& onednn_stream();

// Called in a handler of a dnnl::error: oneDNN's out-of-memory becomes AllocationFailed naming
// `what` ("oneDNN's convolution"); any other error is thrown on as it is.
[[noreturn]] void rethrow_onednn_error(const dnnl::error& e, const char* what);

// dst[0..n) = src rounded to bf16 (to nearest even), as its 16 bits; dst grows when too small.
const uint16_t* round_to_bf16(const float* src, int64_t n, std::vector<uint16_t>& dst);
// dst[0..n) = src rounded to bf16 (to nearest even), by the calling thread alone (for a kernel's tile).
void round_into_bf16(const float* src, int64_t n, uint16_t* dst);
// The same over all threads (for a whole activation).
void round_into_bf16_parallel(const float* src, int64_t n, uint16_t* dst);
// dst's data, dst grown first to exactly n when smaller (the planner's scratch model counts n).
uint16_t* bf16_buffer(std::vector<uint16_t>& dst, int64_t n);

// One f32's bits rounded to bf16 (to nearest even), as round_to_bf16 rounds: for a kernel that
// writes a bf16 copy of what it computes while it is in cache. A NaN stays a (quiet) NaN, as
// core/bf16.hpp's to_bf16 keeps it (rounding its bits could carry it into an infinity or a zero).
inline uint16_t bf16_bits_of(uint32_t f32_bits) {
  const uint16_t rounded = uint16_t((f32_bits + 0x7fffu + ((f32_bits >> 16) & 1u)) >> 16);
  return (f32_bits & 0x7fffffffu) > 0x7f800000u ? uint16_t((f32_bits >> 16) | 0x40u) : rounded;
}

// An element written as stored: f32, or bf16 rounded to nearest even (for kernels written once for
// both output types).
inline void store_as(float* y, float v) { *y = v; }
inline void store_as(uint16_t* y, float v) { *y = bf16_bits_of(std::bit_cast<uint32_t>(v)); }

}  // namespace dtrain
