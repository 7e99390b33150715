// Run-time CPU dispatch and vector-friendly math for the kernels: DT_SIMD compiles a function for
// AVX-512, AVX2+FMA and baseline x86-64 and picks the best at load time; fast_exp is a polynomial
// exp that vectorises (relative error below 3e-7 on the range softmax uses).
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && !defined(__clang__)
#define DT_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DT_SIMD
#endif

namespace dtrain {

// e^x for x in [-87, 88]; smaller x gives 0-ish (clamped to e^-87), as softmax needs.
#pragma omp declare simd notinbranch
inline float fast_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // round to nearest by the 1.5 * 2^23 trick (vectorises, unlike roundf)
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  // e^r on [-ln2/2, ln2/2], degree 6 Taylor/minimax-like coefficients
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t e = int32_t(n) + 127;
  uint32_t bits = uint32_t(e) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

}  // namespace dtrain
