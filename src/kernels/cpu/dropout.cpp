// Dropout kernels (see dropout.hpp): masks drawn 16 bits per element from Philox blocks.
#include "kernels/cpu/dropout.hpp"

#include <cstring>

namespace dtrain {

void dropout_mask(const RandomStream& st, uint32_t threshold, int64_t first, int64_t n, uint8_t* keep) {
  // Element e uses half (e & 1) of word ((e >> 1) & 3) of Philox block (e >> 3).
  int64_t e = first, end = first + n;
  while (e < end) {
    uint64_t blk = uint64_t(e) >> 3;
    auto w = Philox::block({uint32_t(blk), uint32_t(blk >> 32) ^ st.a, st.b, st.c},
                           {uint32_t(st.seed), uint32_t(st.seed >> 32)});
    for (int j = int(e & 7); j < 8 && e < end; ++j, ++e) {
      uint32_t half = (w[j >> 1] >> ((j & 1) * 16)) & 0xffffu;
      keep[e - first] = half >= threshold;
    }
  }
}

namespace {
template <class F>
void for_each_masked(int64_t samples, int64_t per_sample, const DropoutSpec& s, F&& apply) {
  constexpr int64_t kChunk = 4096;
  const int64_t chunks_per_sample = (per_sample + kChunk - 1) / kChunk;
  const uint32_t thr = s.threshold();
#pragma omp parallel for schedule(static)
  for (int64_t job = 0; job < samples * chunks_per_sample; ++job) {
    uint8_t keep[kChunk];
    int64_t sample = job / chunks_per_sample, first = (job % chunks_per_sample) * kChunk;
    int64_t n = per_sample - first < kChunk ? per_sample - first : kChunk;
    dropout_mask(s.stream(sample), thr, first, n, keep);
    apply(sample * per_sample + first, n, keep);
  }
}
}  // namespace

void dropout_forward(const float* x, float* y, int64_t samples, int64_t per_sample, const DropoutSpec& s) {
  if (!s.active()) {
    if (x != y) std::memcpy(y, x, sizeof(float) * samples * per_sample);
    return;
  }
  const float scale = s.scale();
  for_each_masked(samples, per_sample, s, [&](int64_t off, int64_t n, const uint8_t* keep) {
    for (int64_t i = 0; i < n; ++i) y[off + i] = keep[i] ? x[off + i] * scale : 0.0f;
  });
}

void dropout_backward(const float* dy, float* dx, int64_t samples, int64_t per_sample, const DropoutSpec& s) {
  dropout_forward(dy, dx, samples, per_sample, s);  // same mask, same scale
}

}  // namespace dtrain
