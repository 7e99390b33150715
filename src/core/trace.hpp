// A process's trace: named spans on named tracks (compute, phases, a communication group, the
// checkpoint writer), recorded from any thread while tracing is on; a run writes them as a Chrome
// trace (metrics/chrome_trace). Off, a span costs one relaxed atomic load.
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "core/phase_clock.hpp"

namespace dtrain {

struct TraceSpan {
  double start = 0.0, end = 0.0;  // monotonic_seconds()
  std::string track;              // "compute", "phases", "comm dp", "checkpoint", …
  std::string name;
  std::string args;               // a JSON object's text, or empty
};

class Trace {
 public:
  static bool on() { return on_.load(std::memory_order_relaxed); }
  static void set_on(bool on) { on_.store(on, std::memory_order_relaxed); }
  static void record(TraceSpan span);       // thread-safe; past kMaxSpans spans are counted, not kept
  static std::vector<TraceSpan> take();     // everything recorded so far (and clears it)
  static size_t dropped();                  // spans not kept for the limit
  static constexpr size_t kMaxSpans = size_t(1) << 21;

 private:
  static std::atomic<bool> on_;
};

// A span from construction to destruction, when tracing is on at construction.
class TraceScope {
 public:
  // add_seconds: where to add the span's duration as well (traced or not), or null.
  TraceScope(const char* track, const std::string& name, const char* suffix = "", double* add_seconds = nullptr)
      : add_(add_seconds) {
    if (Trace::on()) {
      on_ = true;
      span_.track = track;
      span_.name = name + suffix;
    }
    if (on_ || add_) span_.start = monotonic_seconds();
  }
  void set_args(std::string args) {
    if (on_) span_.args = std::move(args);
  }
  ~TraceScope() {
    if (!on_ && !add_) return;
    span_.end = monotonic_seconds();
    if (add_) *add_ += span_.end - span_.start;
    if (on_) Trace::record(std::move(span_));
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  bool on_ = false;
  double* add_ = nullptr;
  TraceSpan span_;
};

}  // namespace dtrain
