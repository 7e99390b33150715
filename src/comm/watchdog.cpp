// OpWatchdog (see watchdog.hpp).
#include "comm/watchdog.hpp"

namespace dtrain {

OpWatchdog::OpWatchdog(Millis timeout, Overdue overdue) : timeout_(timeout), overdue_(std::move(overdue)) {
  thread_ = std::thread([this] { main(); });
}

OpWatchdog::~OpWatchdog() { stop(); }

void OpWatchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t OpWatchdog::begin(const std::string& what, int64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  forget_finished();
  const uint64_t id = next_++;
  running_.emplace(id, Running{what, seq, Clock::now(), nullptr});
  if (running_.size() == 1) cv_.notify_all();  // the thread may be waiting with nothing to watch
  return id;
}

void OpWatchdog::watch_device(const std::string& what, int64_t seq, std::function<bool()> finished) {
  std::lock_guard<std::mutex> lock(mu_);
  forget_finished();
  running_.emplace(next_++, Running{what, seq, Clock::now(), std::move(finished)});
  if (running_.size() == 1) cv_.notify_all();
}

void OpWatchdog::forget_finished() {
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->second.finished && it->second.finished()) it = running_.erase(it);
    else ++it;
  }
}

void OpWatchdog::end(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.erase(id);
}

void OpWatchdog::main() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (running_.empty()) {
      cv_.wait(lock);
      continue;
    }
    // The oldest operation is the first to be overdue (ids grow with the start time).
    const Running oldest = running_.begin()->second;
    const auto deadline = oldest.since + timeout_;
    if (Clock::now() < deadline) {
      cv_.wait_until(lock, deadline);
      continue;
    }
    if (oldest.finished && oldest.finished()) {
      running_.erase(running_.begin());
      continue;
    }
    lock.unlock();
    overdue_(oldest.what, oldest.seq);  // ends the job
    return;
  }
}

}  // namespace dtrain

