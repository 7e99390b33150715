// Where a rank's training time goes: the training thread is in exactly one phase at a time (data,
// forward, backward, optimizer, exposed communication, checkpoint, eval, other), and the clock
// charges every second between two step ends to the phases it passed through.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain {

enum class Phase : uint8_t { data, forward, backward, optimizer, comm, checkpoint, eval, other };
constexpr int kPhases = 8;
const char* phase_name(Phase p);  // "data", "forward", …
using PhaseSeconds = std::array<double, kPhases>;

// Seconds since an arbitrary fixed point of this machine (CLOCK_MONOTONIC: the same for every
// process on one host); traces and phase marks use it.
inline double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// Seconds from t to now.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Marks on the clock the phases are measured with. The host's by default; a GPU records an event
// on its compute stream at every mark, so phases are the device's time between marks.
class MarkTimer {
 public:
  virtual ~MarkTimer() = default;
  // Mark i of the current step (0 = the previous step's end). Must not throw (a scope's destructor
  // marks): a failure waits for intervals().
  virtual void mark(size_t i) = 0;
  // Waits for mark n-1; out[i] = seconds from mark i to mark i+1, for i < n-1.
  virtual void intervals(size_t n, double* out) = 0;
};

// The training thread's clock. Bind it to the thread that trains (PhaseScope elsewhere does
// nothing); enter() switches phase; end_step() closes a step and returns its seconds per phase.
class PhaseClock {
 public:
  // device: the timer that measures (null: the host clock). Binds to the calling thread.
  explicit PhaseClock(MarkTimer* device = nullptr);
  ~PhaseClock();
  PhaseClock(const PhaseClock&) = delete;

  static PhaseClock* current();  // the calling thread's clock, or null
  // Switches to p (returning true and the phase it left in *left), unless the clock is in eval or
  // checkpoint: what those run is theirs, collectives included, and the clock stays.
  bool enter(Phase p, Phase* left);
  void leave_to(Phase p);  // back to p, unconditionally (a scope's exit)
  Phase phase() const { return phase_; }
  // Closes the step at this point: its seconds per phase (adding up to the time since the previous
  // end_step, or since construction). The phase goes on into the next step.
  const PhaseSeconds& end_step();
  double last_end() const { return host_.front(); }  // when the closed step ended (monotonic_seconds)
  size_t last_changes() const { return last_spans_.size(); }  // phase changes in the closed step

  // What one phase change costs on this machine (seconds; enter and leave of a scope are two),
  // measured on a clock of a thread of its own.
  static double change_cost();
  // The closed step's phase intervals on the host clock (start, end, phase), for a trace.
  struct Interval {
    double start, end;
    Phase phase;
  };
  std::vector<Interval> host_intervals() const;

 private:
  void mark(Phase next);
  MarkTimer* device_;
  Phase phase_ = Phase::other;
  std::vector<double> host_;   // host time of every mark of the step (mark 0: the previous end)
  std::vector<Phase> spans_;   // phase between mark i and i+1
  std::vector<double> device_seconds_;  // device intervals (when a device timer measures)
  std::vector<double> last_host_;
  std::vector<Phase> last_spans_;
  PhaseSeconds step_{};
};

// Runs a scope in phase p on the calling thread's clock (if it has one), then returns to the
// phase it left.
class PhaseScope {
 public:
  explicit PhaseScope(Phase p) : clock_(PhaseClock::current()) {
    if (clock_ && !clock_->enter(p, &left_)) clock_ = nullptr;
  }
  ~PhaseScope() {
    if (clock_) clock_->leave_to(left_);
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseClock* clock_;
  Phase left_ = Phase::other;
};

}  // namespace dtrain
