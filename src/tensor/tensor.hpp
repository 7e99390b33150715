// Element types (f32, bf16, i32) and shapes of the buffers that the arena and checkpoints hold.
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

}  // namespace dtrain
