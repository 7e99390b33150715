// Dropout kernels (see dropout.hpp): masks drawn 16 bits per element from Philox blocks, as bits
// (one per element), then applied by a masked multiply. Philox runs 16 blocks at once: AVX-512
// intrinsics where the CPU has them (with BMI2's pdep to put the bits in element order), a loop the
// compiler vectorises elsewhere; both give the same bits.
#include "kernels/cpu/dropout.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {

namespace {
constexpr int kLanes = 16;              // Philox blocks drawn at once
constexpr int64_t kGroup = 8 * kLanes;  // their elements: 8 per block
constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;

// Philox4x32-10 on kLanes consecutive blocks at once (vectorises); out[w][lane].
inline void philox_lanes(uint64_t first_block, const RandomStream& st, uint32_t out[4][kLanes]) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t blk = first_block + uint64_t(l);
    c0[l] = uint32_t(blk);
    c1[l] = uint32_t(blk >> 32) ^ st.a;
    c2[l] = st.b;
    c3[l] = st.c;
  }
  uint32_t k0 = uint32_t(st.seed), k1 = uint32_t(st.seed >> 32);
  for (int r = 0; r < 10; ++r) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t p0 = uint64_t(M0) * c0[l], p1 = uint64_t(M1) * c2[l];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[l] ^ k0, n2 = uint32_t(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = uint32_t(p1);
      c3[l] = uint32_t(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
    k0 += W0;
    k1 += W1;
  }
  for (int l = 0; l < kLanes; ++l) {
    out[0][l] = c0[l];
    out[1][l] = c1[l];
    out[2][l] = c2[l];
    out[3][l] = c3[l];
  }
}

// The keep bits of groups [g0, g0 + groups): element e of the group is bit e of bits[2g], bits[2g + 1].
DT_SIMD void group_bits_portable(const RandomStream& st, uint32_t thr, int64_t g0, int64_t groups, uint64_t* bits) {
  uint32_t w[4][kLanes];
  for (int64_t g = 0; g < groups; ++g) {
    philox_lanes(uint64_t(g0 + g) * kLanes, st, w);
    uint64_t half[2] = {0, 0};
    for (int l = 0; l < kLanes; ++l)
      for (int j = 0; j < 8; ++j) {
        const uint64_t keep = ((w[j >> 1][l] >> ((j & 1) * 16)) & 0xffffu) >= thr;
        half[l >> 3] |= keep << ((l & 7) * 8 + j);
      }
    bits[2 * g] = half[0];
    bits[2 * g + 1] = half[1];
  }
}

#if defined(__x86_64__)
#define DT_AVX512 __attribute__((target("avx512f,avx512bw,bmi2")))
// GCC 12 warns of the "undefined" vectors its own intrinsics' headers start from (not our code).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// hi and lo 32 bits of m * c, lane by lane.
DT_AVX512 inline void mul_hi_lo(__m512i m, __m512i c, __m512i* hi, __m512i* lo) {
  const __m512i even = _mm512_mul_epu32(c, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(c, 32), m);
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

// group_bits_portable's bits. A block's word w holds elements 2w and 2w + 1 (its two halves); the
// compare gives block l's at bits 2l, 2l + 1, which pdep spreads to 8l + 2w, 8l + 2w + 1.
DT_AVX512 void group_bits_avx512(const RandomStream& st, uint32_t thr, int64_t g0, int64_t groups, uint64_t* bits) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i m0 = _mm512_set1_epi32(int(M0)), m1 = _mm512_set1_epi32(int(M1));
  const __m512i limit = _mm512_set1_epi16(short(uint16_t(std::min<uint32_t>(thr, 0xffffu))));
  for (int64_t g = 0; g < groups; ++g) {
    const uint64_t block = uint64_t(g0 + g) * kLanes;  // a multiple of 16: adding the lane never carries
    __m512i c[4] = {_mm512_add_epi32(_mm512_set1_epi32(int(uint32_t(block))), iota),
                    _mm512_set1_epi32(int(uint32_t(block >> 32) ^ st.a)), _mm512_set1_epi32(int(st.b)),
                    _mm512_set1_epi32(int(st.c))};
    uint32_t k0 = uint32_t(st.seed), k1 = uint32_t(st.seed >> 32);
    for (int r = 0; r < 10; ++r) {
      __m512i hi0, lo0, hi1, lo1;
      mul_hi_lo(m0, c[0], &hi0, &lo0);
      mul_hi_lo(m1, c[2], &hi1, &lo1);
      c[0] = _mm512_ternarylogic_epi32(hi1, c[1], _mm512_set1_epi32(int(k0)), 0x96);  // a ^ b ^ c
      c[2] = _mm512_ternarylogic_epi32(hi0, c[3], _mm512_set1_epi32(int(k1)), 0x96);
      c[1] = lo1;
      c[3] = lo0;
      k0 += W0;
      k1 += W1;
    }
    uint64_t lo = 0, hi = 0;
    for (int w = 0; w < 4; ++w) {
      const uint64_t keep = thr > 0xffffu ? 0 : _mm512_cmpge_epu16_mask(c[w], limit);
      const uint64_t spread = 0x0303030303030303ull << (2 * w);
      lo |= _pdep_u64(keep & 0xffffu, spread);
      hi |= _pdep_u64(keep >> 16, spread);
    }
    bits[2 * g] = lo;
    bits[2 * g + 1] = hi;
  }
}

// apply_bits with masked AVX-512 multiplies, 16 elements a step (x86 is little-endian: bit k of
// the words is bit k & 7 of byte k >> 3).
DT_AVX512 void apply_bits_avx512(const float* x, float* y, int64_t n, const uint64_t* words, int64_t pos,
                                 float scale) {
  const uint8_t* bits = reinterpret_cast<const uint8_t*>(words);
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t at = pos + i;
    uint64_t word;
    std::memcpy(&word, bits + (at >> 3), 8);
    const __mmask16 tail = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __mmask16 keep = __mmask16(word >> (at & 7)) & tail;
    const __m512 v = _mm512_maskz_loadu_ps(tail, x + i);
    _mm512_mask_storeu_ps(y + i, tail, _mm512_maskz_mul_ps(keep, v, s));
  }
}

// bytes_of_bits with 64 bytes a step.
DT_AVX512 void bytes_of_bits_avx512(const uint64_t* bits, int64_t pos, int64_t n, uint8_t* keep) {
  const __m512i one = _mm512_set1_epi8(1);
  for (int64_t i = 0; i < n; i += 64) {
    const int64_t at = pos + i, shift = at & 63;
    const uint64_t lo = bits[at >> 6], word = shift ? (lo >> shift) | (bits[(at >> 6) + 1] << (64 - shift)) : lo;
    const __mmask64 tail = n - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - i)) - 1;
    _mm512_mask_storeu_epi8(keep + i, tail, _mm512_maskz_mov_epi8(__mmask64(word), one));
  }
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool has_avx512_masks() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("bmi2");
  return ok;
}
#else
bool has_avx512_masks() { return false; }
#endif

[[maybe_unused]] bool use_vector(MaskKernel k) { return k == MaskKernel::best && has_avx512_masks(); }

void group_bits(const RandomStream& st, uint32_t thr, int64_t g0, int64_t groups, uint64_t* bits, MaskKernel k) {
#if defined(__x86_64__)
  if (use_vector(k)) return group_bits_avx512(st, thr, g0, groups, bits);
#endif
  group_bits_portable(st, thr, g0, groups, bits);
}

DT_SIMD void apply_bits_portable(const float* x, float* y, int64_t n, const uint64_t* bits, int64_t pos,
                                 float scale) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = pos + i;
    y[i] = (bits[at >> 6] >> (at & 63)) & 1 ? x[i] * scale : 0.0f;
  }
}

// y[i] = x[i] * scale where bit pos + i of `bits` (bit k: bit k & 63 of word k >> 6) is set, else 0
// (in place allowed). bits: readable a word past the last bit used.
void apply_bits(const float* x, float* y, int64_t n, const uint64_t* bits, int64_t pos, float scale, MaskKernel k) {
#if defined(__x86_64__)
  if (use_vector(k)) return apply_bits_avx512(x, y, n, bits, pos, scale);
#endif
  apply_bits_portable(x, y, n, bits, pos, scale);
}

// keep[i] = bit pos + i of bits (0 or 1), for i < n; bits: readable a word past the last bit used.
void bytes_of_bits(const uint64_t* bits, int64_t pos, int64_t n, uint8_t* keep, MaskKernel k) {
#if defined(__x86_64__)
  if (use_vector(k)) return bytes_of_bits_avx512(bits, pos, n, keep);
#endif
  for (int64_t i = 0; i < n; ++i) keep[i] = (bits[(pos + i) >> 6] >> ((pos + i) & 63)) & 1;
}

constexpr int64_t kMaskPiece = 4096;  // elements masked from one bits buffer
constexpr int64_t kMaskPieceWords = 2 * (kMaskPiece / kGroup + 1) + 1;  // its groups' bits, and a word to read past
static_assert(kMaskPiece % kGroup == 0, "a piece at any offset spans at most kMaskPiece / kGroup + 1 groups");

// The bits of elements [first, first + n) (n <= kMaskPiece) into `bits`; returns where element `first` is.
int64_t draw_bits(const RandomStream& st, uint32_t thr, int64_t first, int64_t n, uint64_t* bits, MaskKernel k) {
  const int64_t g0 = first / kGroup, groups = (first + n - 1) / kGroup - g0 + 1;
  group_bits(st, thr, g0, groups, bits, k);
  bits[2 * groups] = 0;
  return first - g0 * kGroup;
}

// Calls use(at, len, bits, pos) for the pieces [at, at + len) of elements [first, first + n) of the
// stream, their mask bits drawn into `bits` with element first + at at bit pos.
template <class F>
void for_each_piece(const RandomStream& st, uint32_t thr, int64_t first, int64_t n, MaskKernel k, F&& use) {
  uint64_t bits[kMaskPieceWords];
  for (int64_t at = 0; at < n; at += kMaskPiece) {
    const int64_t len = std::min(kMaskPiece, n - at);
    use(at, len, bits, draw_bits(st, thr, first + at, len, bits, k));
  }
}
}  // namespace

bool dropout_vectorised() { return has_avx512_masks(); }

void dropout_mask(const RandomStream& st, uint32_t threshold, int64_t first, int64_t n, uint8_t* keep, MaskKernel k) {
  for_each_piece(st, threshold, first, n, k, [&](int64_t at, int64_t len, const uint64_t* bits, int64_t pos) {
    bytes_of_bits(bits, pos, len, keep + at, k);
  });
}

void dropout_scale_run(const RandomStream& st, uint32_t threshold, float scale, int64_t first, int64_t n,
                       const float* x, float* y, MaskKernel k) {
  for_each_piece(st, threshold, first, n, k, [&](int64_t at, int64_t len, const uint64_t* bits, int64_t pos) {
    apply_bits(x + at, y + at, len, bits, pos, scale, k);
  });
}

namespace {
// Calls apply(sample, local offset, n, first element) over the tile in pieces of at most kMaskPiece elements,
// each within one sample's contiguous run: where the tile has whole rows (cols == global cols)
// consecutive rows of a sample are one run (context parallel: of one of the shard's runs of
// positions), otherwise each row is one.
template <class F>
void for_each_run(int64_t rows, int64_t cols, const DropoutSpec& s, F&& apply) {
  const int64_t gcols = s.global_cols > 0 ? s.global_cols : cols, rps = s.rows_per_sample;
  const bool whole_rows = gcols == cols;
  // runs: [first local row, rows in run); with whole rows, split at sample boundaries (and at the
  // shard's runs of positions, which divide a sample's rows in two)
  const int64_t run_rows = s.sequence.active() ? s.sequence.chunk : rps;
  DT_ASSERT(!s.sequence.active() || rps == 2 * s.sequence.chunk);
  const int64_t g0 = s.row_offset, g1 = s.row_offset + rows;
  const int64_t runs = whole_rows ? (g1 - 1) / run_rows - g0 / run_rows + 1 : rows;
  const int64_t run_elems = whole_rows ? run_rows * cols : cols;
  const int64_t chunks = (run_elems + kMaskPiece - 1) / kMaskPiece;
#pragma omp parallel for schedule(static)
  for (int64_t job = 0; job < runs * chunks; ++job) {
    const int64_t run = job / chunks, c = job % chunks;
    int64_t first_row, nrows;  // whole rows g of this run
    if (whole_rows) {
      const int64_t run_first = (g0 / run_rows + run) * run_rows;
      first_row = std::max(g0, run_first);
      nrows = std::min(g1, run_first + run_rows) - first_row;
    } else {
      first_row = g0 + run;
      nrows = 1;
    }
    const int64_t len = nrows * cols, from = c * kMaskPiece;
    if (from >= len) continue;
    const int64_t elem = s.sequence.position(first_row % rps) * gcols + s.col_offset + from;
    apply(first_row / rps, (first_row - g0) * cols + from, std::min(kMaskPiece, len - from), elem);
  }
}
}  // namespace

void dropout_forward(const float* x, ActBuffer y, int64_t rows, int64_t cols, const DropoutSpec& s) {
  if (!s.active()) {
    if (y.bf16)
      round_into_bf16_parallel(x, rows * cols, y.b16());
    else if (x != y.data)
      std::memcpy(y.data, x, sizeof(float) * rows * cols);
    return;
  }
  const float scale = s.scale();
  const uint32_t thr = s.threshold();
  if (!y.bf16) {
    float* out = y.f32();
    for_each_run(rows, cols, s, [&](int64_t sample, int64_t off, int64_t n, int64_t elem) {
      dropout_scale_run(s.stream(sample), thr, scale, elem, n, x + off, out + off);
    });
    return;
  }
  uint16_t* out = y.b16();  // each run scaled into a tile of f32 while in cache, then rounded
  for_each_run(rows, cols, s, [&](int64_t sample, int64_t off, int64_t n, int64_t elem) {
    alignas(64) float tile[kMaskPiece];
    dropout_scale_run(s.stream(sample), thr, scale, elem, n, x + off, tile);
    round_into_bf16(tile, n, out + off);
  });
}

void dropout_forward(const uint16_t* x, uint16_t* y, int64_t rows, int64_t cols, const DropoutSpec& s) {
  DT_ASSERT(x != y);
  if (!s.active()) {
    std::memcpy(y, x, sizeof(uint16_t) * rows * cols);
    return;
  }
  const float scale = s.scale();
  const uint32_t thr = s.threshold();
  for_each_run(rows, cols, s, [&](int64_t sample, int64_t off, int64_t n, int64_t elem) {
    alignas(64) float tile[kMaskPiece];
    for (int64_t i = 0; i < n; ++i) tile[i] = to_f32(bf16{x[off + i]});
    dropout_scale_run(s.stream(sample), thr, scale, elem, n, tile, tile);
    round_into_bf16(tile, n, y + off);
  });
}

void dropout_backward(const float* dy, float* dx, int64_t rows, int64_t cols, const DropoutSpec& s) {
  dropout_forward(dy, dx, rows, cols, s);  // same mask, same scale
}

}  // namespace dtrain
