// Counter-based random numbers (Philox4x32-10). A draw is a pure function of its key and counter,
// so dropout masks and initial weights do not depend on threads, ranks or parallel layout.
#pragma once
#include <array>
#include <cstdint>

#if defined(__CUDACC__)
#define DT_HOST_DEVICE __host__ __device__
#else
#define DT_HOST_DEVICE
#endif

namespace dtrain {

// Ten Philox rounds on counter c with key (k0, k1), in place; host and GPU share this code.
DT_HOST_DEVICE inline void philox10(uint32_t c[4], uint32_t k0, uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t(M0) * c[0], p1 = uint64_t(M1) * c[2];
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c[1] ^ k0, n2 = uint32_t(p0 >> 32) ^ c[3] ^ k1;
    c[1] = uint32_t(p1);
    c[3] = uint32_t(p0);
    c[0] = n0;
    c[2] = n2;
    k0 += W0;
    k1 += W1;
  }
}

struct Philox {
  static std::array<uint32_t, 4> block(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
    philox10(ctr.data(), key[0], key[1]);
    return ctr;
  }
};

// A stream of uniform draws addressed by (seed, a, b, c, index): a, b, c name the purpose
// (e.g. step, unit and site, sample row); index is the element (< 2^34 per stream).
struct RandomStream {
  uint64_t seed;
  uint32_t a;
  uint32_t b;
  uint32_t c;

  // 32 random bits for element `index`.
  uint32_t bits(uint64_t index) const {
    auto out = Philox::block({uint32_t(index >> 2), a, b, c}, {uint32_t(seed), uint32_t(seed >> 32)});
    return out[index & 3];
  }
  // Uniform in [0, 1) with 24 bits of resolution.
  float uniform(uint64_t index) const { return float(bits(index) >> 8) * (1.0f / 16777216.0f); }
};

// Dropout: one stream per (step, unit, site, global sample row).
inline RandomStream dropout_stream(uint64_t seed, uint32_t step, uint32_t unit, uint32_t site,
                                   uint32_t sample) {
  return RandomStream{seed, step, (unit << 8) | site, sample};
}

// Parameter initialisation: one stream per parameter tensor.
inline RandomStream init_stream(uint64_t seed, uint32_t param_index) {
  return RandomStream{seed, 0xFFFFFFFFu, param_index, 0x1417u};
}

}  // namespace dtrain
