// The memory cap of `dtrain data prepare --tokenizer` (--memory-mib): bytes the reader takes before it
// fills a chunk (waiting while the chunks in flight hold the cap) and the writer gives back after it.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace dtrain {

class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}
  // Takes n bytes once they fit under the limit; false (nothing taken) once stop() was called.
  bool acquire(int64_t n);
  // Takes n bytes when they fit now; false (nothing taken) otherwise.
  bool try_acquire(int64_t n);
  // Takes n bytes at once, even past the limit (ids that came out longer than foreseen).
  void take(int64_t n);
  void release(int64_t n);
  // Wakes and refuses every waiting and later acquire().
  void stop();
  int64_t limit() const { return limit_; }
  // The most bytes held at once.
  int64_t peak() const;

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  const int64_t limit_;
  int64_t held_ = 0, peak_ = 0;
  bool stopped_ = false;
};

}  // namespace dtrain
