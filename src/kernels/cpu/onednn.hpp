// What the kernels that call oneDNN share (matmul, convolution, pooling): the process's CPU engine
// and stream, its out-of-memory error made dtrain's, and f32 → bf16 rounding into a reused buffer.
#pragma once
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

}  // namespace dtrain
