// What context parallel's attention moved and how long the training thread waited for it.
#pragma once
#include <chrono>
#include <cstdint>

namespace dtrain {

struct CpStats {
  int64_t bytes = 0;           // sent by this rank (ring: key/value blocks and their gradients; all-to-all: its shares)
  int64_t transfers = 0;       // sends (ring) or all-to-alls
  double wait_seconds = 0.0;   // the training thread waited for them (exposed)
  double attention_seconds = 0.0;  // the attention's kernels beside them
  // Seconds from t to now (the waits and kernels above are timed with it).
  static double since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  CpStats& operator+=(const CpStats& o) {
    bytes += o.bytes;
    transfers += o.transfers;
    wait_seconds += o.wait_seconds;
    attention_seconds += o.attention_seconds;
    return *this;
  }
};

}  // namespace dtrain
