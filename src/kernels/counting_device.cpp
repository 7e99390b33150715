// CountingDevice (see counting_device.hpp).
#include "kernels/counting_device.hpp"

#include <sys/mman.h>

#include <algorithm>

namespace dtrain {

namespace {

// One range of address space per process, reserved with no access: a planned block's address
// lies in it, so a stray read or write faults at once. Blocks past its end start over at its base
// (planning compares no addresses across blocks; nothing touches them).
struct Reserved {
  char* base = nullptr;
  size_t bytes = 0;
  Reserved() {
    for (size_t b = size_t(1) << 44; b >= (size_t(1) << 30); b >>= 2) {
      void* p = mmap(nullptr, b, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) {
        base = static_cast<char*>(p);
        bytes = b;
        return;
      }
    }
  }
};

Reserved& reserved() {
  static Reserved r;
  return r;
}

}  // namespace

void* CountingDevice::allocate_zeroed(size_t bytes) {
  Reserved& r = reserved();
  require(r.base != nullptr, "the planner could not reserve address space for its counting device: raise `ulimit -v`");
  const size_t size = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  if (next_ + size > r.bytes) next_ = 0;
  void* p = r.base + (size > r.bytes ? 0 : next_);
  next_ += std::min(size, r.bytes);
  live_.emplace(p, bytes);
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
  return p;
}

void CountingDevice::release(void* p) {
  auto it = live_.find(p);
  DT_ASSERT(it != live_.end());
  in_use_ -= it->second;
  live_.erase(it);
}

void CountingDevice::no_kernel(const char* name) const {
  DT_ASSERT(!"the planner's counting device runs no kernel" && name);
  throw Error(std::string("internal error: planning ran the kernel ") + name);
}

}  // namespace dtrain
