// Tensor views: dtype, shape and a pointer into memory owned elsewhere (an Arena or a unit buffer).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/bf16.hpp"
#include "core/error.hpp"

namespace dtrain {

enum class DType : uint8_t { f32, bf16, i32 };

inline size_t dtype_size(DType t) { return t == DType::bf16 ? 2 : 4; }
// Names as safetensors writes them: F32, BF16, I32.
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
  }
  return "?";
}

inline int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape);

struct Tensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  void* data = nullptr;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  float* f32() const {
    DT_ASSERT(dtype == DType::f32);
    return static_cast<float*>(data);
  }
  int32_t* i32() const {
    DT_ASSERT(dtype == DType::i32);
    return static_cast<int32_t*>(data);
  }
  bf16* b16() const {
    DT_ASSERT(dtype == DType::bf16);
    return static_cast<bf16*>(data);
  }
};

}  // namespace dtrain
