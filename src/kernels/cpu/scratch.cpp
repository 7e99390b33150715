// Grow-only scratch buffers (see scratch.hpp).
#include "kernels/cpu/scratch.hpp"

#include <cstring>
#include <vector>

namespace dtrain {

float* scratch(ScratchSlot slot, int64_t n) {
  static std::vector<float> buffers[int(ScratchSlot::count)];
  auto& b = buffers[int(slot)];
  if (int64_t(b.size()) < n) b.resize(n);
  return b.data();
}

float* scratch_zeroed(ScratchSlot slot, int64_t n) {
  float* p = scratch(slot, n);
  std::memset(p, 0, sizeof(float) * n);
  return p;
}

}  // namespace dtrain
