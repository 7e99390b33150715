// Heartbeats through the store, so that a failed or timed-out collective can name the ranks
// that were missing: never started, behind (not yet at this operation) or stopped (no beat).
#pragma once
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "comm/store.hpp"

namespace dtrain {

class Liveness {
 public:
  // Beats every `interval` under key hb/<global_rank> of the store (its own connection).
  Liveness(std::shared_ptr<Store> store, int global_rank, Millis interval = Millis(1000));
  ~Liveness();
  // This rank has started operation `seq` (1-based) of group `group`.
  void started(const std::string& group, int64_t seq);
  // Why ranks of `group` may be missing from its operation `seq`, one phrase per rank (empty:
  // nothing found). Waits up to a few beats to tell stopped ranks from live ones.
  std::vector<std::string> explain(const std::string& group, int64_t seq, const std::vector<int>& ranks);

 private:
  void beat();
  std::string encode();

  std::shared_ptr<Store> store_;
  int rank_;
  Millis interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int64_t> started_;
  int64_t beats_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dtrain
