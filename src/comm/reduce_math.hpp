// The element arithmetic every CPU backend reduces with (Gloo, MPI), so that they round alike:
// bf16 elements combine through f32 with each result rounded back to bf16, and avg is a sum
// scaled by 1/ranks afterwards (in double for f32 and f64, then rounded to the element type).
// And the ring reduce-scatter both run (ring_reduce_scatter), over whatever moves their bytes.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

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

template <class T>
void typed_add(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) static_cast<T*>(c)[i] = static_cast<const T*>(a)[i] + static_cast<const T*>(b)[i];
}
template <class T>
void typed_min(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    static_cast<T*>(c)[i] = std::min(static_cast<const T*>(a)[i], static_cast<const T*>(b)[i]);
}
template <class T>
void typed_max(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    static_cast<T*>(c)[i] = std::max(static_cast<const T*>(a)[i], static_cast<const T*>(b)[i]);
}

template <class T>
ReduceFn typed_reduce_fn(ReduceOp op) {
  return op == ReduceOp::min ? &typed_min<T> : op == ReduceOp::max ? &typed_max<T> : &typed_add<T>;
}

// c = op(a, b) elementwise for elements of t (avg reduces as sum; scale_elements divides after).
inline ReduceFn reduce_fn(ElemType t, ReduceOp op) {
  switch (t) {
    case ElemType::bf16:
      return op == ReduceOp::min ? &bf16_reduce<reduce_min> : op == ReduceOp::max ? &bf16_reduce<reduce_max>
                                                                                  : &bf16_reduce<reduce_add>;
    case ElemType::f32: return typed_reduce_fn<float>(op);
    case ElemType::f64: return typed_reduce_fn<double>(op);
    case ElemType::i32: return typed_reduce_fn<int32_t>(op);
    case ElemType::i64: return typed_reduce_fn<int64_t>(op);
  }
  return nullptr;
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

// Ring reduce-scatter: P-1 steps; at step s rank r passes its partial sum of chunk r-s-1 on to rank
// r+1 and adds its own part of chunk r-s-2 to the partial arriving from rank r-1 (so every backend
// adds in the same order, and agrees bit for bit). Only one partial is sent while the next arrives:
// the last step's lands in `out` (when it lies apart from the input), the others alternate between
// `stage_a` and `stage_b`, the caller's, kept between calls and grown to one chunk each when used
// (never at 2 ranks with `out` apart): no copy of the input is made. exchange(step, send,
// send_bytes, recv, recv_bytes) posts the step's send to rank r+1 and receive from rank r-1 (a side
// of 0 bytes posts nothing), returns once the receive is complete, and returns a function that waits
// for the send. `out` may overlap `in`.
template <class Exchange>
void ring_reduce_scatter(int P, int r, const void* in, void* out, const std::vector<size_t>& counts, ElemType t,
                         ReduceOp op, std::vector<char>& stage_a, std::vector<char>& stage_b, Exchange&& exchange) {
  const size_t es = elem_size(t);
  std::vector<size_t> off(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) off[i + 1] = off[i] + counts[i];
  if (P == 1) {
    if (out != in) std::memmove(out, in, counts[0] * es);
    return;
  }
  size_t max_chunk = 0;
  for (size_t c : counts) max_chunk = std::max(max_chunk, c);
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  const bool out_apart = dst + counts[size_t(r)] * es <= src || src + off.back() * es <= dst;
  auto staging = [&](std::vector<char>& b) {
    if (b.size() < std::max<size_t>(1, max_chunk * es)) b.resize(std::max<size_t>(1, max_chunk * es));
    return b.data();
  };
  auto chunk = [&](int c) { return size_t(((c % P) + P) % P); };
  const ReduceFn fn = reduce_fn(t, op);
  char* partial = nullptr;  // the previous step's sum, sent on at this step
  for (int s = 0; s < P - 1; ++s) {
    const size_t cs = chunk(r - s - 1), cr = chunk(r - s - 2);
    const char* send = s == 0 ? src + off[cs] * es : partial;
    char* recv = s == P - 2 && out_apart ? dst : staging(s % 2 == 0 ? stage_a : stage_b);
    auto finish_send = exchange(s, const_cast<char*>(send), counts[cs] * es, recv, counts[cr] * es);
    if (counts[cr]) fn(recv, src + off[cr] * es, recv, counts[cr]);  // this rank's part + the partial received
    finish_send();
    partial = recv;
  }
  if (partial != dst) std::memcpy(dst, partial, counts[size_t(r)] * es);
  if (op == ReduceOp::avg) scale_elements(out, counts[size_t(r)], t, 1.0 / P);
}

}  // namespace dtrain
