// Arena and aligned buffers (see arena.hpp).
#include "tensor/arena.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.hpp"
#include "core/limits.hpp"

namespace dtrain {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

size_t available_host_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return SIZE_MAX;
  char line[256];
  unsigned long long kib = 0, total = 0;
  int found = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1 || std::sscanf(line, "SwapFree: %llu kB", &kib) == 1) {
      total += kib;
      ++found;
    }
  std::fclose(f);
  size_t bytes = found ? size_t(total) * 1024 : SIZE_MAX;
  // Under an address-space limit (ulimit -v) what may still be mapped counts too.
  if (const int64_t limit = address_space_limit())
    bytes = std::min(bytes, size_t(std::max<int64_t>(0, limit - address_space_in_use())));
  return bytes;
}

namespace {

// 64-byte-aligned zeroed host memory. A large request beyond what the machine has left fails here as
// std::bad_alloc, rather than the out-of-memory killer ending the process while it is zeroed.
void* allocate_host_zeroed(size_t bytes) {
  const size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  if (rounded >= (size_t(64) << 20) && rounded > available_host_bytes()) throw std::bad_alloc();
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return p;
}

}  // namespace

void AlignedBuffer::Free::operator()(void* p) const { std::free(p); }

AlignedBuffer::AlignedBuffer(size_t bytes) : ptr_(allocate_host_zeroed(bytes)), bytes_(bytes) {}

namespace {
class HostMemory final : public Memory {
 public:
  void* allocate_zeroed(size_t bytes) override { return allocate_host_zeroed(bytes); }
  void release(void* p) override { std::free(p); }
  bool host_accessible() const override { return true; }
};
}  // namespace

Memory& host_memory() {
  static HostMemory m;
  return m;
}

size_t Arena::bytes_reserved() const {
  size_t n = 0;
  for (const Buffer& b : chunks_) n += b.size();
  return n;
}

void* Arena::alloc(int64_t n, DType dtype) {
  const size_t bytes = (size_t(n) * dtype_size(dtype) + 63) / 64 * 64;
  if (is_counting()) {
    used_ += bytes;
    return nullptr;
  }
  if (base_) {
    DT_ASSERT(used_ + bytes <= limit_ && "a plan over a region asked for more than the region holds");
    void* p = base_ + used_;
    used_ += bytes;
    return p;
  }
  if (chunks_.empty() || offset_ + bytes > chunks_.back().size()) {
    chunks_.emplace_back(*memory_, bytes > chunk_bytes_ ? bytes : chunk_bytes_);
    offset_ = 0;
  }
  void* p = static_cast<char*>(chunks_.back().data()) + offset_;
  offset_ += bytes;
  used_ += bytes;
  return p;
}

}  // namespace dtrain
