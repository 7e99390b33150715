// The device time of each kernel family (DTRAIN_PROFILE=1): a pair of CUDA events around every
// ComputeDevice call, summed by the call's name when asked; parts of a call may be timed inside it
// under names "call/part" (their time is also the call's). Off, it costs a branch per call.
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

#include "kernels/device.hpp"

namespace dtrain::cuda {

class OpProfile {
 public:
  explicit OpProfile(cudaStream_t stream);
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  bool on() const { return on_; }
  void begin(const char* name, double flops = 0.0);
  void end();
  // Time (and FLOPs, calls) per name since the last take (waits for the stream), largest first.
  std::vector<OpTime> take();

  class Scope {
   public:
    Scope(OpProfile& p, const char* name, double flops = 0.0) : p_(p.on() ? &p : nullptr) {
      if (p_) p_->begin(name, flops);
    }
    ~Scope() {
      if (p_) p_->end();
    }
    Scope(const Scope&) = delete;

   private:
    OpProfile* p_;
  };

 private:
  struct Span {
    const char* name;
    size_t first, last;  // indices of its start and end events (last 0: still open)
    double flops;
  };
  cudaEvent_t event(size_t i);
  void fold();  // the ended spans' times into sums_ (waits for the stream), their events reused

  static constexpr size_t kFoldEvery = 1 << 16;
  cudaStream_t stream_;
  bool on_ = false;
  std::vector<cudaEvent_t> events_;
  std::vector<Span> spans_;
  std::vector<size_t> open_;  // spans begun and not ended, innermost last
  size_t used_ = 0;
  std::map<std::string, OpTime> sums_;  // folded so far (a long run keeps few events)
};

}  // namespace dtrain::cuda
