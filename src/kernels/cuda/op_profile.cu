// OpProfile (see op_profile.hpp).
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/op_profile.hpp"

#include <algorithm>

namespace dtrain::cuda {

OpProfile::OpProfile(cudaStream_t stream) : stream_(stream), on_(op_profile_requested()) {}

OpProfile::~OpProfile() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

cudaEvent_t OpProfile::event(size_t i) {
  while (events_.size() <= i) {
    cudaEvent_t e = nullptr;
    DT_CUDA(cudaEventCreate(&e));
    events_.push_back(e);
  }
  return events_[i];
}

void OpProfile::begin(const char* name, double flops) {
  open_.push_back(spans_.size());
  spans_.push_back({name, used_, 0, flops});
  DT_CUDA(cudaEventRecord(event(used_++), stream_));
}

void OpProfile::end() {
  spans_[open_.back()].last = used_;
  open_.pop_back();
  DT_CUDA(cudaEventRecord(event(used_++), stream_));
  if (used_ >= kFoldEvery) fold();  // a long run under the profile holds a bounded set of events
}

void OpProfile::fold() {
  if (used_ == 0 || !open_.empty()) return;  // inside a call: its spans end first
  DT_CUDA(cudaEventSynchronize(events_[used_ - 1]));
  for (const Span& s : spans_) {
    float ms = 0.0f;
    DT_CUDA(cudaEventElapsedTime(&ms, events_[s.first], events_[s.last]));
    OpTime& t = sums_[s.name];
    t.name = s.name;
    t.seconds += double(ms) / 1000.0;
    t.flops += s.flops;
    ++t.calls;
  }
  spans_.clear();
  used_ = 0;
}

std::vector<OpTime> OpProfile::take() {
  fold();
  std::vector<OpTime> out;
  for (auto& [name, t] : sums_) out.push_back(t);
  sums_.clear();
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return out;
}

}  // namespace dtrain::cuda
