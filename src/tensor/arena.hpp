// Arena: 64-byte-aligned memory (host or device) handed out by bumping a pointer. Buffers are carved
// from it when a model is planned (before the step loop) and reused every step, so the loop never
// allocates. A model counts its plan first and gives the arena one block of exactly that size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/memory.hpp"
#include "tensor/tensor.hpp"

namespace dtrain {

// A zero-initialised, 64-byte-aligned owning buffer.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  void* data() const { return ptr_.get(); }
  size_t size() const { return bytes_; }
  float* f32() const { return static_cast<float*>(data()); }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t bytes_ = 0;
};

class Arena {
 public:
  explicit Arena(Memory& memory = host_memory(), size_t chunk_bytes = size_t(64) << 20)
      : memory_(&memory), chunk_bytes_(chunk_bytes) {}
  // An arena that only counts: every request is answered with null and added to bytes_used()
  // (what a plan would take, before any memory is).
  static Arena counting() {
    Arena a;
    a.memory_ = nullptr;
    return a;
  }
  // An arena over `bytes` of memory it does not own, from `base` on (a region another arena planned,
  // which several plans share because they never run at once). Its memory is zeroed only as the
  // region was. Over a null base (the region of a counting plan) it counts.
  static Arena over(void* base, size_t bytes) {
    Arena a;
    a.memory_ = nullptr;
    a.base_ = static_cast<char*>(base);
    a.limit_ = bytes;
    return a;
  }
  bool is_counting() const { return memory_ == nullptr && base_ == nullptr; }
  // Zeroed memory for n elements, valid for the arena's lifetime.
  void* alloc(int64_t n, DType dtype);
  float* f32(int64_t n) { return static_cast<float*>(alloc(n, DType::f32)); }
  size_t bytes_used() const { return used_; }
  // Bytes of the blocks it holds (bytes_used() and the unused tails of its blocks).
  size_t bytes_reserved() const;

 private:
  Memory* memory_;
  size_t chunk_bytes_;
  std::vector<Buffer> chunks_;
  size_t offset_ = 0;  // within the last chunk
  size_t used_ = 0;
  char* base_ = nullptr;  // over(): the region handed out, and its size
  size_t limit_ = 0;
};

}  // namespace dtrain
