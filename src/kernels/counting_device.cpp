// CountingDevice (see counting_device.hpp).
#include "kernels/counting_device.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace dtrain {

namespace {

// One range of address space per process, reserved without backing memory and cut into slots, one
// per counting device alive at once (the planner builds ranks on several threads): a planned block's
// address lies in its device's slot. Reading a block finds zeros and takes no memory (the kernel's
// zero page); host code that writes device memory itself (the CPU backend's host loops: a router's
// choices, a balance loss's gradient) takes the pages it writes, which the device gives back, zeroed,
// when it ends. Blocks past a slot's end start over at its base.
class Reserved {
 public:
  static constexpr int kSlots = 8;
  Reserved() {
    for (size_t b = size_t(1) << 44; b >= (size_t(1) << 30); b >>= 2) {
      void* p = mmap(nullptr, b, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) {
        base_ = static_cast<char*>(p);
        slot_bytes_ = b / kSlots / 4096 * 4096;
        return;
      }
    }
  }
  size_t slot_bytes() const { return slot_bytes_; }
  // A free slot's base (waiting for one when all are taken).
  char* take() {
    require(base_ != nullptr, "the planner could not reserve address space for its counting device: raise `ulimit -v`");
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return std::find(used_, used_ + kSlots, false) != used_ + kSlots; });
    const int i = int(std::find(used_, used_ + kSlots, false) - used_);
    used_[i] = true;
    return base_ + size_t(i) * slot_bytes_;
  }
  // Gives a slot back with the first `touched` bytes zeroed (pages returned to the kernel).
  void give_back(char* slot, size_t touched) {
    if (touched) madvise(slot, std::min(touched, slot_bytes_), MADV_DONTNEED);
    {
      std::lock_guard<std::mutex> lock(mu_);
      used_[(slot - base_) / ptrdiff_t(slot_bytes_)] = false;
    }
    cv_.notify_one();
  }

 private:
  char* base_ = nullptr;
  size_t slot_bytes_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool used_[kSlots] = {};
};

Reserved& reserved() {
  static Reserved r;
  return r;
}

}  // namespace

CountingDevice::~CountingDevice() {
  if (slot_) reserved().give_back(static_cast<char*>(slot_), touched_);
}

void* CountingDevice::allocate_zeroed(size_t bytes) {
  Reserved& r = reserved();
  if (!slot_) slot_ = r.take();
  const size_t size = (std::max<size_t>(bytes, 1) + 63) / 64 * 64, room = r.slot_bytes();
  if (next_ + size > room) next_ = 0;
  void* p = static_cast<char*>(slot_) + (size > room ? 0 : next_);
  next_ += std::min(size, room);
  touched_ = std::max(touched_, std::min(next_, room));
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

}  // namespace dtrain
