// The shared oneDNN engine and stream, and bf16 rounding (see onednn.hpp).
#include "kernels/cpu/onednn.hpp"

#include <algorithm>

#include "core/limits.hpp"
#include "kernels/cpu/simd.hpp"

namespace dtrain {

namespace {
struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};
Engine& shared() {
  static Engine e;
  return e;
}
}  // namespace

dnnl::engine& onednn_engine() { return shared().engine; }
dnnl::stream& onednn_stream() { return shared().stream; }

void rethrow_onednn_error(const dnnl::error& e, const char* what) {
  if (e.status == dnnl_out_of_memory) throw AllocationFailed(what);
  throw;
}

uint16_t* bf16_buffer(std::vector<uint16_t>& dst, int64_t n) {
  if (int64_t(dst.size()) < n) dst = std::vector<uint16_t>(size_t(n));
  return dst.data();
}

const uint16_t* round_to_bf16(const float* src, int64_t n, std::vector<uint16_t>& dst) {
  uint16_t* out = bf16_buffer(dst, n);
  round_into_bf16_parallel(src, n, out);
  return out;
}

DT_SIMD void round_into_bf16(const float* src, int64_t n, uint16_t* dst) {
  const uint32_t* in = reinterpret_cast<const uint32_t*>(src);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_of(in[i]);
}

void round_into_bf16_parallel(const float* src, int64_t n, uint16_t* dst) {
  constexpr int64_t kPiece = 16384;
#pragma omp parallel for schedule(static)
  for (int64_t at = 0; at < n; at += kPiece) round_into_bf16(src + at, std::min(kPiece, n - at), dst + at);
}

}  // namespace dtrain
