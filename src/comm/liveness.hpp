// Heartbeats through the store, so that a failed or timed-out collective can name the ranks
// that were missing: never started, behind (not yet at this operation) or stopped (no beat), and
// for how long a stopped rank has been silent.
#pragma once
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "comm/store.hpp"

namespace dtrain {

class Liveness {
 public:
  // Beats every `interval` under key hb/<global_rank> of the store (its own connection).
  Liveness(std::shared_ptr<Store> store, int global_rank, Millis interval = Millis(1000));
  ~Liveness();
  // This rank has started operation `seq` (1-based) of group `group`, whose members are the
  // global ranks `ranks`; finished() when it is over. While an operation is outstanding for more
  // than a beat, the members' heartbeats are watched (read once a beat).
  void started(const std::string& group, int64_t seq, const std::vector<int>& ranks);
  void finished(const std::string& group);
  // Why ranks of `group` may be missing from its operation `seq`, one phrase per rank (empty:
  // nothing found). Waits a few beats to tell stopped ranks from live ones; a stopped rank is
  // reported with the time since its heartbeat was last seen changing.
  std::vector<std::string> explain(const std::string& group, int64_t seq, const std::vector<int>& ranks);

 private:
  using Clock = std::chrono::steady_clock;
  struct Beat {
    int64_t count = -1;
    std::map<std::string, int64_t> started;
  };
  // What this rank has seen of another's heartbeat.
  struct Seen {
    bool known = false;
    int64_t count = -1;
    Clock::time_point since;  // when `count` was first read: no beat since then
    Clock::time_point last_read;
    bool tight = false;  // `count` replaced another read at most two beats before
  };
  struct Outstanding {
    std::vector<int> ranks;
    Clock::time_point since;
  };

  void beat();
  std::string encode();
  static Beat parse(const std::string& v);
  std::optional<Beat> observe(int rank);  // reads its heartbeat and notes when the count changed

  std::shared_ptr<Store> store_;
  int rank_;
  Millis interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int64_t> started_;
  std::map<std::string, Outstanding> outstanding_;
  int64_t beats_ = 0;
  bool stop_ = false;
  std::mutex seen_mu_;
  std::map<int, Seen> seen_;
  std::thread thread_;
};

}  // namespace dtrain
