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
  CpStats& operator+=(const CpStats& o) {
    bytes += o.bytes;
    transfers += o.transfers;
    wait_seconds += o.wait_seconds;
    attention_seconds += o.attention_seconds;
    return *this;
  }
};

}  // namespace dtrain
