// TensorParallelRegions (see regions.hpp).
#include "parallel/tp/regions.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/error.hpp"

namespace dtrain {

namespace {
// Rows per chunk of a row-parallel matmul whose sum overlaps the next chunk: at least this many (a
// smaller chunk costs more in its collective's latency than it hides).
constexpr int64_t kMinChunkRows = 64;
double tp_wait_seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

TensorParallelRegions::TensorParallelRegions(ProcessGroup& group, bool sequence, bool overlap, int chunks)
    : group_(group), sequence_(sequence), overlap_(overlap), chunks_(std::max(1, chunks)) {}

template <class F>
void TensorParallelRegions::timed(int64_t& counter, int64_t bytes, F&& collective) {
  const auto t0 = std::chrono::steady_clock::now();
  collective();
  counter += bytes;
  ++stats_.collectives;
  const double s = tp_wait_seconds(t0);
  stats_.seconds += s;
  stats_.busy_seconds += s;
}

WorkPtr TensorParallelRegions::started(int64_t& counter, int64_t bytes, WorkPtr w) {
  counter += bytes;
  ++stats_.collectives;
  return w;
}

void TensorParallelRegions::wait(const WorkPtr& w) {
  const auto t0 = std::chrono::steady_clock::now();
  w->wait();
  stats_.seconds += tp_wait_seconds(t0);
  stats_.busy_seconds += w->seconds();
}

WorkPtr TensorParallelRegions::start_sum(float* partial, float* local, int64_t rows, int64_t cols) {
  const int64_t bytes = rows * cols * int64_t(sizeof(float));
  if (!sequence_)
    return started(stats_.allreduce_bytes, bytes,
                   group_.allreduce_async(partial, size_t(rows * cols), ElemType::f32, ReduceOp::sum));
  const int64_t n = rows / group_.size();
  DT_ASSERT(n * group_.size() == rows);
  const std::vector<size_t> counts(size_t(group_.size()), size_t(n * cols));
  return started(stats_.reduce_scatter_bytes, bytes,
                 group_.reduce_scatter_async(partial, local, counts, ElemType::f32, ReduceOp::sum));
}

PendingSum TensorParallelRegions::sum_partials_begin(float* partial, float* local, int64_t rows, int64_t cols) {
  if (!overlap_) return PendingSum(sum_partials(partial, local, rows, cols));
  WorkPtr w = start_sum(partial, local, rows, cols);
  float* result = sequence_ ? local : partial;
  return PendingSum([this, w, result] {
    wait(w);
    return result;
  });
}

float* TensorParallelRegions::sum_partials_of(float* partial, float* local, int64_t rows, int64_t cols,
                                              const RowChunk& produce) {
  // Sequence parallel scatters whole slices of rows: one reduce-scatter after the whole matmul.
  const int64_t chunks = std::min<int64_t>(chunks_, rows / kMinChunkRows);
  if (!overlap_ || sequence_ || chunks < 2) {
    produce(0, rows);
    return sum_partials(partial, local, rows, cols);
  }
  pending_.assign(size_t(chunks), nullptr);
  std::vector<WorkPtr>& pending = pending_;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t r0 = rows * c / chunks, n = rows * (c + 1) / chunks - r0;
    produce(r0, n);
    pending[c] = started(stats_.allreduce_bytes, n * cols * int64_t(sizeof(float)),
                         group_.allreduce_async(partial + r0 * cols, size_t(n * cols), ElemType::f32, ReduceOp::sum));
  }
  for (int64_t c = 0; c < chunks; ++c) wait(pending[c]);
  return partial;
}

namespace {
ElemType elem_of(Operand x) { return x.bf16 ? ElemType::bf16 : ElemType::f32; }
}  // namespace

void TensorParallelRegions::all_rows_then(Operand local, void* full, int64_t rows, int64_t cols,
                                          const RowsReady& consume) {
  if (!sequence_) {
    consume(0, rows, local);
    return;
  }
  const int S = group_.size(), me = group_.rank();
  const int64_t n = rows / S;
  DT_ASSERT(n * S == rows);
  if (!overlap_) {
    consume(0, rows, all_rows(local, full, rows, cols));
    return;
  }
  const std::vector<size_t> counts(size_t(S), size_t(n * cols));
  WorkPtr w = started(stats_.allgather_bytes, int64_t(local.bytes(n * cols)),
                      group_.allgather_async(local.data, full, counts, elem_of(local)));
  consume(me * n, n, local);  // this slice's rows, while the others' arrive
  wait(w);
  for (int s = 0; s < S; ++s)
    if (s != me) consume(s * n, n, local.like(full).at(s * n * cols));
}

Operand TensorParallelRegions::all_rows(Operand local, void* full, int64_t rows, int64_t cols) {
  if (!sequence_) return local;
  const int64_t n = rows / group_.size();
  DT_ASSERT(n * group_.size() == rows);
  timed(stats_.allgather_bytes, int64_t(local.bytes(n * cols)),
        [&] { group_.allgather(local.data, full, size_t(n * cols), elem_of(local)); });
  return local.like(full);
}

float* TensorParallelRegions::sum_partials(float* partial, float* local, int64_t rows, int64_t cols) {
  const int64_t bytes = rows * cols * int64_t(sizeof(float));
  if (!sequence_) {
    timed(stats_.allreduce_bytes, bytes, [&] { group_.allreduce(partial, size_t(rows * cols), ReduceOp::sum); });
    return partial;
  }
  const int64_t n = rows / group_.size();
  DT_ASSERT(n * group_.size() == rows);
  const std::vector<size_t> counts(size_t(group_.size()), size_t(n * cols));
  timed(stats_.reduce_scatter_bytes, bytes,
        [&] { group_.reduce_scatter_async(partial, local, counts, ElemType::f32, ReduceOp::sum)->wait(); });
  return local;
}

void TensorParallelRegions::all_columns(const float* local, float* full, int64_t rows, int64_t cols,
                                        int64_t full_cols) {
  const int S = group_.size();
  std::vector<float> slices(size_t(S * rows * cols));
  group_.allgather(local, slices.data(), size_t(rows * cols), ElemType::f32);
  for (int s = 0; s < S; ++s)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = std::clamp<int64_t>(full_cols - s * cols, 0, cols);  // the padded last slices hold fewer
      std::copy(slices.data() + (s * rows + r) * cols, slices.data() + (s * rows + r) * cols + n,
                full + r * full_cols + s * cols);
    }
}

void TensorParallelRegions::max(float* v, int64_t n) {
  timed(stats_.allreduce_bytes, n * int64_t(sizeof(float)), [&] { group_.allreduce(v, size_t(n), ReduceOp::max); });
}

void TensorParallelRegions::sum(float* v, int64_t n) {
  timed(stats_.allreduce_bytes, n * int64_t(sizeof(float)), [&] { group_.allreduce(v, size_t(n), ReduceOp::sum); });
}

}  // namespace dtrain
