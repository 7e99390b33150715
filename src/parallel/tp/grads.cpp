// TensorParallelGrads (see grads.hpp).
#include "parallel/tp/grads.hpp"

#include <algorithm>

namespace dtrain {

TensorParallelGrads::TensorParallelGrads(ProcessGroup& group, std::vector<ParamShard> shards,
                                         std::vector<ShardOf> where, ComputeDevice& device)
    : group_(group), dev_(device) {
  for (size_t k = 0; k < shards.size(); ++k) {
    const int64_t lo = where[k].begin, hi = lo + shards[k].numel;
    for (const ParamInfo& p : where[k].unit->params()) {
      const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.numel());
      if (a >= b) continue;
      const Range r{shards[k].grad + (a - lo), b - a};
      (p.is_cut() ? cut_ : replicated_).push_back(r);
      if (p.partial_grad) {
        partial_.push_back(r);
        staged_ += r.n;
      }
    }
  }
  if (staged_ > 0) staging_ = Buffer(dev_, sizeof(float) * size_t(staged_));
  acc_ = Buffer(dev_, 2 * sizeof(double));
}

void TensorParallelGrads::finish_gradients() {
  if (staged_ == 0) return;
  float* s = staging_.f32();
  for (const Range& r : partial_) {
    dev_.copy(s, r.grad, sizeof(float) * size_t(r.n));
    s += r.n;
  }
  group_.allreduce(staging_.f32(), size_t(staged_), ReduceOp::sum);
  s = staging_.f32();
  for (const Range& r : partial_) {
    dev_.copy(r.grad, s, sizeof(float) * size_t(r.n));
    s += r.n;
  }
}

double TensorParallelGrads::grad_sumsq_part() {
  double* acc = static_cast<double*>(acc_.data());
  dev_.zero(acc, 2 * sizeof(double));
  for (const Range& r : cut_) dev_.sumsq(r.grad, r.n, acc);
  for (const Range& r : replicated_) dev_.sumsq(r.grad, r.n, acc + 1);
  double sq[2] = {0.0, 0.0};
  dev_.download(sq, acc, sizeof sq);
  return sq[0] + sq[1] / double(group_.size());
}

}  // namespace dtrain
