// CRC-32C (Castagnoli), as used by TFRecord framing in TensorBoard event files. Uses the SSE4.2
// crc32 instruction when the CPU has it, a table otherwise; both give identical results.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dtrain {

// CRC-32C of n bytes. Pass a previous result as `crc` to extend it over more bytes:
// crc32c(b, nb, crc32c(a, na)) == crc32c of a followed by b.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// The table-driven version, always available (exposed so tests can compare against hardware).
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0);

// True when crc32c() uses the SSE4.2 instruction on this machine.
bool crc32c_hardware();

// TFRecord's masking of stored CRCs: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
inline uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t crc32c_unmask(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace dtrain
