// The one-process tensor-parallel regions (see tp_regions.hpp).
#include "nn/tp_regions.hpp"

#include <cstring>

namespace dtrain {

void TpRegions::all_columns(const float* local, float* full, int64_t rows, int64_t cols, int64_t full_cols) {
  for (int64_t r = 0; r < rows; ++r)
    std::memmove(full + r * full_cols, local + r * cols, sizeof(float) * size_t(full_cols));
}

TpRegions& no_tp_regions() {
  static TpRegions none;
  return none;
}

}  // namespace dtrain
