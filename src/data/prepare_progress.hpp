// The progress of `dtrain data prepare --tokenizer` on stderr: a line rewritten in place on a
// terminal (MB read of the input's total, MB/s, tokens, ETA), else one summary line at the end.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace dtrain {

class PrepareProgress {
 public:
  explicit PrepareProgress(uint64_t total_bytes);
  ~PrepareProgress();  // ends a terminal line left open by an error
  // After each chunk written: `read` input bytes behind what is written, `tokens` written. At most two
  // lines a second.
  void update(uint64_t read, int64_t tokens);
  // Ends the terminal line, or prints the summary line.
  void finish(uint64_t read, int64_t tokens);
  double seconds() const;

 private:
  std::string line(uint64_t read, int64_t tokens, bool done) const;
  const uint64_t total_;
  const bool terminal_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
  bool printed_ = false, finished_ = false;
};

}  // namespace dtrain
