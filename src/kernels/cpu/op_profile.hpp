// The host time of each kernel family on the CPU device (DTRAIN_PROFILE=1, `bench_train --profile`):
// a steady clock around every ComputeDevice call, summed by the call's name. Off, a branch per call.
#pragma once
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "kernels/device.hpp"

namespace dtrain {

class HostOpProfile {
 public:
  HostOpProfile() : on_(op_profile_requested()) {}
  bool on() const { return on_; }
  // Time (and FLOPs, calls) per name since the last take, largest first.
  std::vector<OpTime> take();

  class Scope {
   public:
    Scope(HostOpProfile& p, const char* name, double flops = 0.0)
        : p_(p.on() ? &p : nullptr), name_(name), flops_(flops) {
      if (p_) start_ = std::chrono::steady_clock::now();
    }
    ~Scope() {
      if (p_) p_->add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(), flops_);
    }
    Scope(const Scope&) = delete;

   private:
    HostOpProfile* p_;
    const char* name_;
    double flops_;
    std::chrono::steady_clock::time_point start_;
  };

 private:
  void add(const char* name, double seconds, double flops);
  bool on_;
  std::map<std::string, OpTime> sums_;
};

}  // namespace dtrain
