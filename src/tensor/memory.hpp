// Where buffers live: a Memory hands out zeroed blocks (host RAM, or a GPU's memory) and a
// Buffer owns one. The arena, the model's parameters and the optimizer state all go through it.
#pragma once
#include <cstddef>
#include <utility>

namespace dtrain {

class Memory {
 public:
  virtual ~Memory() = default;
  // A zeroed block of at least `bytes` bytes, 64-byte aligned; only at planning time.
  virtual void* allocate_zeroed(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  // Whether the CPU can read and write the blocks directly.
  virtual bool host_accessible() const = 0;
};

// 64-byte-aligned zeroed host memory.
Memory& host_memory();

// Bytes of host memory the kernel can still hand out (MemAvailable + SwapFree, and no more than the
// address-space limit leaves), SIZE_MAX if unknown.
size_t available_host_bytes();

// One owned block of a Memory.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Memory& m, size_t bytes) : mem_(&m), ptr_(m.allocate_zeroed(bytes)), bytes_(bytes) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      mem_ = std::exchange(o.mem_, nullptr);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void reset() {
    if (ptr_) mem_->release(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* data() const { return ptr_; }
  float* f32() const { return static_cast<float*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  Memory* mem_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dtrain
