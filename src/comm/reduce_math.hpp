// The element arithmetic every CPU backend reduces with (Gloo, MPI), so that they round alike:
// bf16 elements combine through f32 with each result rounded back to bf16, and avg is a sum
// scaled by 1/ranks afterwards (in double for f32 and f64, then rounded to the element type).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "comm/process_group.hpp"
#include "core/bf16.hpp"

namespace dtrain {

inline float reduce_add(float a, float b) { return a + b; }
inline float reduce_min(float a, float b) { return std::min(a, b); }
inline float reduce_max(float a, float b) { return std::max(a, b); }

// c[i] = Op(a[i], b[i]) over bf16 bits (c may be a or b).
template <float (*Op)(float, float)>
void bf16_reduce(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<uint16_t*>(c);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = to_bf16(Op(to_f32(bf16{x[i]}), to_f32(bf16{y[i]}))).bits;
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// The bf16 reduction of op (avg reduces as sum; scale_elements divides after).
inline ReduceFn bf16_reduce_fn(ReduceOp op) {
  return op == ReduceOp::min ? &bf16_reduce<reduce_min> : op == ReduceOp::max ? &bf16_reduce<reduce_max>
                                                                              : &bf16_reduce<reduce_add>;
}

// data[i] *= s for the floating types (avg after a sum: s = 1 / ranks).
inline void scale_elements(void* data, size_t n, ElemType t, double s) {
  if (t == ElemType::bf16) {
    uint16_t* p = static_cast<uint16_t*>(data);
    for (size_t i = 0; i < n; ++i) p[i] = to_bf16(float(to_f32(bf16{p[i]}) * s)).bits;
  } else if (t == ElemType::f32) {
    float* p = static_cast<float*>(data);
    for (size_t i = 0; i < n; ++i) p[i] = float(p[i] * s);
  } else {
    double* p = static_cast<double*>(data);
    for (size_t i = 0; i < n; ++i) p[i] *= s;
  }
}

}  // namespace dtrain
