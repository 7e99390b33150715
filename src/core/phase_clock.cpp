// The training thread's phase clock (see phase_clock.hpp).
#include "core/phase_clock.hpp"

#include <thread>

#include "core/error.hpp"

namespace dtrain {

namespace {
thread_local PhaseClock* t_clock = nullptr;
}  // namespace

const char* phase_name(Phase p) {
  static const char* names[kPhases] = {"data", "forward", "backward", "optimizer", "comm", "checkpoint", "eval", "other"};
  return names[int(p)];
}

PhaseClock::PhaseClock(MarkTimer* device) : device_(device) {
  DT_ASSERT(t_clock == nullptr);  // one clock per training thread
  t_clock = this;
  host_.reserve(1024);
  spans_.reserve(1024);
  host_.push_back(monotonic_seconds());
  if (device_) device_->mark(0);
}

PhaseClock::~PhaseClock() { t_clock = nullptr; }

PhaseClock* PhaseClock::current() { return t_clock; }

void PhaseClock::mark(Phase next) {
  const size_t i = host_.size();
  host_.push_back(monotonic_seconds());
  if (device_) device_->mark(i);
  spans_.push_back(phase_);
  phase_ = next;
}

bool PhaseClock::enter(Phase p, Phase* left) {
  if (phase_ == Phase::eval || phase_ == Phase::checkpoint) return false;
  *left = phase_;
  if (p != phase_) mark(p);
  return true;
}

void PhaseClock::leave_to(Phase p) {
  if (p != phase_) mark(p);
}

const PhaseSeconds& PhaseClock::end_step() {
  mark(phase_);
  step_.fill(0.0);
  const size_t n = host_.size();
  if (device_) {
    device_seconds_.resize(n - 1);
    device_->intervals(n, device_seconds_.data());
  }
  for (size_t i = 0; i + 1 < n; ++i)
    step_[size_t(spans_[i])] += device_ ? device_seconds_[i] : host_[i + 1] - host_[i];
  last_host_.assign(host_.begin(), host_.end());
  last_spans_.assign(spans_.begin(), spans_.end());
  const double end = host_.back();
  host_.clear();
  spans_.clear();
  host_.push_back(end);
  if (device_) device_->mark(0);
  return step_;
}

double PhaseClock::change_cost() {
  constexpr int kPairs = 4000;
  double cost = 0.0;
  std::thread([&] {
    PhaseClock clock;
    for (int round = 0; round < 2; ++round) {  // the first round grows the buffers
      const double t0 = monotonic_seconds();
      for (int i = 0; i < kPairs; ++i) {
        PhaseScope s(i % 2 ? Phase::forward : Phase::backward);
      }
      clock.end_step();
      cost = (monotonic_seconds() - t0) / (2.0 * kPairs);
    }
  }).join();
  return cost;
}

std::vector<PhaseClock::Interval> PhaseClock::host_intervals() const {
  std::vector<Interval> out;
  for (size_t i = 0; i < last_spans_.size(); ++i)
    if (last_host_[i + 1] > last_host_[i]) out.push_back({last_host_[i], last_host_[i + 1], last_spans_[i]});
  return out;
}

}  // namespace dtrain
