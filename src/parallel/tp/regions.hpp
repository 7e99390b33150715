// Tensor parallelism's region operators over the mesh's tp group (Megatron's f and g): all-reduce
// of partial sums, or under sequence parallel all-gather before the column-parallel matmuls and
// reduce-scatter after the row-parallel ones; plus the vocabulary-parallel loss's row statistics.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/process_group.hpp"
#include "kernels/device.hpp"
#include "nn/tp_regions.hpp"

namespace dtrain {

// Bytes this rank sent into each kind of collective (as the payload it contributes), all passes.
struct TpStats {
  int64_t allreduce_bytes = 0;       // partial sums (no sequence parallel) and row statistics
  int64_t allgather_bytes = 0;       // this rank's rows, gathered (sequence parallel)
  int64_t reduce_scatter_bytes = 0;  // whole partial sums, scattered (sequence parallel)
  int64_t collectives = 0;
  double seconds = 0.0;       // the training thread waited for them (exposed)
  double busy_seconds = 0.0;  // they ran (on the communication thread or inline), hidden or not
  TpStats& operator+=(const TpStats& o) {
    allreduce_bytes += o.allreduce_bytes;
    allgather_bytes += o.allgather_bytes;
    reduce_scatter_bytes += o.reduce_scatter_bytes;
    collectives += o.collectives;
    seconds += o.seconds;
    busy_seconds += o.busy_seconds;
    return *this;
  }
};

class TensorParallelRegions : public TpRegions {
 public:
  // group: the tp ranks (this rank is slice group.rank()); sequence: rows split across them;
  // overlap: run collectives beside the matmuls (sum_partials_begin, all_rows_then, and
  // sum_partials_of in up to `chunks` row chunks), else each blocks where it is called.
  TensorParallelRegions(ProcessGroup& group, bool sequence, bool overlap = true, int chunks = 1);

  using TpRegions::all_rows;  // the f32 form
  Operand all_rows(Operand local, void* full, int64_t rows, int64_t cols) override;
  float* sum_partials(float* partial, float* local, int64_t rows, int64_t cols) override;
  PendingSum sum_partials_begin(float* partial, float* local, int64_t rows, int64_t cols) override;
  float* sum_partials_of(float* partial, float* local, int64_t rows, int64_t cols, const RowChunk& produce) override;
  void all_rows_then(Operand local, void* full, int64_t rows, int64_t cols, const RowsReady& consume) override;
  void all_columns(const float* local, float* full, int64_t rows, int64_t cols, int64_t full_cols) override;
  void max(float* v, int64_t n) override;
  void sum(float* v, int64_t n) override;

  const TpStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  // Runs one collective, counting its bytes into `counter` and its time.
  template <class F>
  void timed(int64_t& counter, int64_t bytes, F&& collective);
  // Counts a started collective's bytes; wait() then counts its time.
  WorkPtr started(int64_t& counter, int64_t bytes, WorkPtr w);
  void wait(const WorkPtr& w);
  // The partial sums' reduction: all-reduce in place, or reduce-scatter into `local`.
  WorkPtr start_sum(float* partial, float* local, int64_t rows, int64_t cols);

  ProcessGroup& group_;
  bool sequence_;
  bool overlap_;
  int chunks_;
  std::vector<WorkPtr> pending_;  // sum_partials_of's chunks in flight
  TpStats stats_;
};

}  // namespace dtrain
