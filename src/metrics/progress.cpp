// Progress line, durations and peak memory (see progress.hpp).
#include "metrics/progress.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace dtrain {

std::string format_duration(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, (int(s) % 3600) / 60);
  return buf;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

ProgressLine::ProgressLine(bool enabled) : enabled_(enabled && ::isatty(2)), start_(std::chrono::steady_clock::now()) {}

void ProgressLine::update(const std::string& prefix, int64_t done, int64_t total, double loss, double tps) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (start_done_ < 0 || done < start_done_) {
    start_done_ = done;
    start_ = now;
  }
  if (drawn_ && now - last_ < std::chrono::milliseconds(200) && done != total) return;
  last_ = now;
  const double el = std::chrono::duration<double>(now - start_).count();
  const double rate = done > start_done_ ? el / double(done - start_done_) : 0.0;
  const std::string eta = rate > 0 ? format_duration(rate * double(total - done)) : "?";
  const int width = 24, fill = total > 0 ? int(width * done / total) : 0;
  std::string bar(fill, '#');
  bar += std::string(width - fill, '.');
  std::fprintf(stderr, "\r\033[K%s [%s] %lld/%lld loss %.4f  %.0f tok/s  ETA %s", prefix.c_str(), bar.c_str(),
               (long long)done, (long long)total, loss, tps, eta.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressLine::clear() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace dtrain
