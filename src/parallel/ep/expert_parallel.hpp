// Expert parallel as ParallelModel applies it (DESIGN §3.9, docs/distributed.md): the ep ranks of a
// run of dp_shard × cp split every mixture-of-experts layer's experts equally; each layer's tokens
// travel to their experts' ranks and back through this exchange (an all-to-all of the counts, then
// an all-to-all of uneven row blocks), and counts what it moved.
#pragma once
#include <cstdint>

#include "comm/process_group.hpp"
#include "nn/expert_exchange.hpp"

namespace dtrain {

struct EpStats {
  int64_t bytes = 0;          // rows sent by this rank (counts not included)
  int64_t exchanges = 0;      // row all-to-alls (two per layer and pass each way)
  double wait_seconds = 0.0;  // the training thread waited for them (the counts' too): exposed
  EpStats& operator+=(const EpStats& o) {
    bytes += o.bytes;
    exchanges += o.exchanges;
    wait_seconds += o.wait_seconds;
    return *this;
  }
};

class ExpertParallel : public ExpertExchange {
 public:
  explicit ExpertParallel(ProcessGroup& group) : group_(group) {}
  int ranks() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  void exchange_counts(const int64_t* send, int64_t* recv, int64_t per_rank) override;
  void exchange_rows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                     const std::vector<int64_t>& recv_rows, int64_t width) override;
  // What it moved since the last call.
  EpStats take_stats() {
    const EpStats s = stats_;
    stats_ = {};
    return s;
  }

 private:
  ProcessGroup& group_;
  EpStats stats_;
  std::vector<size_t> send_counts_, recv_counts_;  // elements per rank of the running exchange
};

}  // namespace dtrain
