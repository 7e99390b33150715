// The byte budget of chunks in flight (see memory_budget.hpp).
#include "data/memory_budget.hpp"

#include <algorithm>

namespace dtrain {

bool MemoryBudget::acquire(int64_t n) {
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait(lock, [&] { return stopped_ || held_ + n <= limit_ || held_ == 0; });
  if (stopped_) return false;
  held_ += n;
  peak_ = std::max(peak_, held_);
  return true;
}

bool MemoryBudget::try_acquire(int64_t n) {
  std::lock_guard<std::mutex> lock(m_);
  if (stopped_ || held_ + n > limit_) return false;
  held_ += n;
  peak_ = std::max(peak_, held_);
  return true;
}

void MemoryBudget::take(int64_t n) {
  std::lock_guard<std::mutex> lock(m_);
  held_ += n;
  peak_ = std::max(peak_, held_);
}

void MemoryBudget::release(int64_t n) {
  {
    std::lock_guard<std::mutex> lock(m_);
    held_ -= n;
  }
  cv_.notify_all();
}

void MemoryBudget::stop() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stopped_ = true;
  }
  cv_.notify_all();
}

int64_t MemoryBudget::peak() const {
  std::lock_guard<std::mutex> lock(m_);
  return peak_;
}

}  // namespace dtrain
