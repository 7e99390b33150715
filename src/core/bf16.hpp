// bfloat16 storage type: conversion to and from f32 (round to nearest even).
#pragma once
#include <cstdint>
#include <cstring>

namespace dtrain {

struct bf16 {
  uint16_t bits;
};

inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return bf16{uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}

inline float to_f32(bf16 h) {
  uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// An element of an activation stored in f32 or in bf16 (its 16 bits) as f32, for kernels written once
// for both storage types.
inline float as_f32(float x) { return x; }
inline float as_f32(uint16_t bits) { return to_f32(bf16{bits}); }

}  // namespace dtrain
