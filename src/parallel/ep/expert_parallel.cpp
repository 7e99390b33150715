// ExpertParallel (see expert_parallel.hpp).
#include "parallel/ep/expert_parallel.hpp"

#include <chrono>

#include "core/phase_clock.hpp"

namespace dtrain {

void ExpertParallel::exchange_counts(const int64_t* send, int64_t* recv, int64_t per_rank) {
  const auto t0 = std::chrono::steady_clock::now();
  group_.all_to_all(send, recv, size_t(per_rank), ElemType::i64);
  stats_.wait_seconds += seconds_since(t0);
}

void ExpertParallel::exchange_rows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                                   const std::vector<int64_t>& recv_rows, int64_t width) {
  std::vector<size_t>& out = send_counts_;
  std::vector<size_t>& in = recv_counts_;
  out.resize(send_rows.size());  // (sized once: the group's ranks)
  in.resize(recv_rows.size());
  for (size_t j = 0; j < out.size(); ++j) {
    out[j] = size_t(send_rows[j] * width);
    in[j] = size_t(recv_rows[j] * width);
    if (int(j) != group_.rank()) stats_.bytes += int64_t(out[j] * sizeof(float));
  }
  const auto t0 = std::chrono::steady_clock::now();
  group_.all_to_all_v(send, out, recv, in, ElemType::f32);
  stats_.wait_seconds += seconds_since(t0);
  ++stats_.exchanges;
}

}  // namespace dtrain
