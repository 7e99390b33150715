// Progress lines of `dtrain data prepare --tokenizer` (see prepare_progress.hpp).
#include "data/prepare_progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace dtrain {

namespace {

std::string fixed1(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f", v);
  return s;
}

}  // namespace

PrepareProgress::PrepareProgress(uint64_t total_bytes)
    : total_(total_bytes),
      terminal_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

PrepareProgress::~PrepareProgress() {
  if (terminal_ && printed_ && !finished_) std::fprintf(stderr, "\r\033[K");
}

double PrepareProgress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string PrepareProgress::line(uint64_t read, int64_t tokens, bool done) const {
  const double secs = seconds();
  const double mb = double(read) / 1e6, rate = secs > 0 ? mb / secs : 0;
  std::string s = "prepare: " + fixed1(mb) + " of " + fixed1(double(total_) / 1e6) + " MB read, " + fixed1(rate) +
                  " MB/s, " + std::to_string(tokens) + " tokens";
  if (done) return s + " in " + fixed1(secs) + " s";
  if (rate > 0 && total_ > read) s += ", ETA " + std::to_string(int64_t(double(total_ - read) / 1e6 / rate)) + " s";
  return s;
}

void PrepareProgress::update(uint64_t read, int64_t tokens) {
  if (!terminal_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_print_ < std::chrono::milliseconds(500)) return;
  last_print_ = now;
  std::fprintf(stderr, "\r%s\033[K", line(read, tokens, false).c_str());
  std::fflush(stderr);
  printed_ = true;
}

void PrepareProgress::finish(uint64_t read, int64_t tokens) {
  if (terminal_ && printed_) std::fprintf(stderr, "\r\033[K");
  finished_ = true;
  std::fprintf(stderr, "%s\n", line(read, tokens, true).c_str());
}

}  // namespace dtrain
