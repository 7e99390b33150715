// Helpers of the tests of activations kept in bf16: a vector rounded to bf16 (its 16 bits, to nearest
// even) and widened back.
#pragma once
#include <cstdint>
#include <vector>

#include "core/bf16.hpp"

namespace dtrain {

inline std::vector<uint16_t> rounded(const std::vector<float>& x) {
  std::vector<uint16_t> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = to_bf16(x[i]).bits;
  return r;
}

inline std::vector<float> widened(const std::vector<uint16_t>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = to_f32(bf16{x[i]});
  return r;
}

}  // namespace dtrain
