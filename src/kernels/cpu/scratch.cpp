// Grow-only scratch buffers (see scratch.hpp).
#include "kernels/cpu/scratch.hpp"

#include <cstring>
#include <vector>

namespace dtrain {

namespace {
std::vector<float> buffers[int(ScratchSlot::count)];
}  // namespace

float* scratch(ScratchSlot slot, int64_t n) {
  auto& b = buffers[int(slot)];
  if (int64_t(b.size()) < n) b = std::vector<float>(size_t(n));  // exactly n: what the planner counts
  return b.data();
}

int64_t scratch_bytes() {
  int64_t n = 0;
  for (const auto& b : buffers) n += int64_t(b.capacity() * sizeof(float));
  return n;
}

float* scratch_zeroed(ScratchSlot slot, int64_t n) {
  float* p = scratch(slot, n);
  std::memset(p, 0, sizeof(float) * n);
  return p;
}

}  // namespace dtrain
