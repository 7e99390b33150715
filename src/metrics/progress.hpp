// Human-facing run output: a progress line with ETA on a terminal, durations, peak memory.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace dtrain {

// "1h02m", "3m05s", "12.3s"
std::string format_duration(double seconds);
// Peak resident memory of this process in MiB.
double peak_rss_mb();

class ProgressLine {
 public:
  // Draws only when stderr is a terminal and enabled is true.
  explicit ProgressLine(bool enabled);
  // Redraws at most ~5 times a second.
  void update(const std::string& prefix, int64_t done, int64_t total, double loss, double tokens_per_s);
  // Erases the line (before a normal log line is printed).
  void clear();

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{}, start_;
  int64_t start_done_ = -1;
};

}  // namespace dtrain
