// Arena and aligned buffers (see arena.hpp).
#include "tensor/arena.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace dtrain {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void AlignedBuffer::Free::operator()(void* p) const { std::free(p); }

AlignedBuffer::AlignedBuffer(size_t bytes) : bytes_(bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  ptr_.reset(p);
}

namespace {
class HostMemory final : public Memory {
 public:
  void* allocate_zeroed(size_t bytes) override {
    const size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    return p;
  }
  void release(void* p) override { std::free(p); }
  bool host_accessible() const override { return true; }
};
}  // namespace

Memory& host_memory() {
  static HostMemory m;
  return m;
}

void* Arena::alloc(int64_t n, DType dtype) {
  const size_t bytes = (size_t(n) * dtype_size(dtype) + 63) / 64 * 64;
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
