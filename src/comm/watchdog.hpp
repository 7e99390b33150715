// Watches the operations of a backend that cannot give up by itself (MPI, NCCL): on its own thread,
// it hands an operation still running after the timeout to `overdue`, which ends the job. A host
// operation runs from begin() to end(); a device operation (NCCL's, queued on a stream) from
// watch_device() until its `finished` says so, asked when later operations begin and at its deadline.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "comm/store.hpp"

namespace dtrain {

class OpWatchdog {
 public:
  using Overdue = std::function<void(const std::string& what, int64_t seq)>;
  OpWatchdog(Millis timeout, Overdue overdue);
  ~OpWatchdog();
  OpWatchdog(const OpWatchdog&) = delete;
  // Ends the watching (joins the thread); begin() and end() may still be called, nothing fires.
  void stop();

  // An operation (its description, and the group's collective number for the diagnosis) begins or
  // ends on some thread.
  uint64_t begin(const std::string& what, int64_t seq);
  void end(uint64_t id);
  void watch_device(const std::string& what, int64_t seq, std::function<bool()> finished);

  class Scope {
   public:
    Scope(OpWatchdog* w, const std::string& what, int64_t seq) : w_(w), id_(w ? w->begin(what, seq) : 0) {}
    ~Scope() {
      if (w_) w_->end(id_);
    }
    Scope(const Scope&) = delete;

   private:
    OpWatchdog* w_;
    uint64_t id_;
  };

 private:
  using Clock = std::chrono::steady_clock;
  struct Running {
    std::string what;
    int64_t seq;
    Clock::time_point since;
    std::function<bool()> finished;  // a device operation's; empty for a host operation
  };
  void main();
  void forget_finished();  // drops the device operations that have finished (mu_ held)

  Millis timeout_;
  Overdue overdue_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Running> running_;
  uint64_t next_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dtrain
