// TensorParallelRegions (see regions.hpp).
#include "parallel/tp/regions.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/error.hpp"

namespace dtrain {

TensorParallelRegions::TensorParallelRegions(ProcessGroup& group, bool sequence) : group_(group), sequence_(sequence) {}

template <class F>
void TensorParallelRegions::timed(int64_t& counter, int64_t bytes, F&& collective) {
  const auto t0 = std::chrono::steady_clock::now();
  collective();
  counter += bytes;
  ++stats_.collectives;
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const float* TensorParallelRegions::all_rows(const float* local, float* full, int64_t rows, int64_t cols) {
  if (!sequence_) return local;
  const int64_t n = rows / group_.size();
  DT_ASSERT(n * group_.size() == rows);
  timed(stats_.allgather_bytes, n * cols * int64_t(sizeof(float)),
        [&] { group_.allgather(local, full, size_t(n * cols), ElemType::f32); });
  return full;
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
