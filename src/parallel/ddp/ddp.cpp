// DataParallel (see ddp.hpp).
#include "parallel/ddp/ddp.hpp"

#include <algorithm>
#include <chrono>

#include "core/error.hpp"

namespace dtrain {

size_t DataParallel::automatic_bucket_bytes(const std::vector<Unit*>& units) {
  size_t grads = 0;
  for (const Unit* u : units) grads += size_t(u->numel()) * sizeof(float);
  return std::clamp<size_t>(grads / 8, size_t(1) << 20, size_t(25) << 20);
}

DataParallel::DataParallel(const std::vector<Unit*>& units, ProcessGroup& group, size_t bucket_bytes,
                           ProcessGroup* experts)
    : units_(units), group_(group), experts_(experts ? experts : &group), bucket_of_(units.size()) {
  if (bucket_bytes == 0) bucket_bytes = automatic_bucket_bytes(units);
  bucket_bytes_ = bucket_bytes;
  // The first bucket (the last units, whose gradients are ready first) is capped at 1 MiB, as in
  // PyTorch, so that communication starts as early as possible.
  const size_t cap = std::max<size_t>(bucket_bytes / sizeof(float), 1);
  const size_t first_cap = std::min<size_t>(cap, (1u << 20) / sizeof(float));
  Bucket cur;
  auto close = [&] {
    if (!cur.units.empty()) buckets_.push_back(cur);
    cur = Bucket{};
  };
  auto limit = [&] { return buckets_.empty() ? first_cap : cap; };  // the open bucket's size
  for (size_t k = units.size(); k-- > 0;) {
    Unit* u = units[k];
    ProcessGroup* g = u->experts() ? experts_ : &group_;
    // A bucket is one contiguous range of one group's units (the next unit must end where it
    // starts), and a unit that would take it past its size starts the next: joined to a large
    // unit, the units before it would wait for that unit's backward (the embedding's: the last).
    if (!cur.units.empty() && (u->grad_data() + u->numel() != cur.data || cur.group != g ||
                               cur.numel + size_t(u->numel()) > limit()))
      close();
    cur.group = g;
    cur.units.push_back(k);
    cur.data = u->grad_data();
    cur.numel += size_t(u->numel());
    bucket_of_[k] = buckets_.size();
    if (cur.numel >= limit()) close();
  }
  close();
  launched_.reserve(buckets_.size());
  for (auto& b : buckets_)
    if (b.group->size() > 1) stats_.bytes += int64_t(b.numel * sizeof(float));
}

void DataParallel::broadcast_parameters() {
  std::vector<WorkPtr> w;
  for (Unit* u : units_) {
    ProcessGroup& g = u->experts() ? *experts_ : group_;
    if (g.size() > 1) w.push_back(g.broadcast_async(u->param_data(), size_t(u->numel()), ElemType::f32, 0));
  }
  for (auto& x : w) x->wait();
}

bool DataParallel::reduces() const { return group_.size() > 1 || experts_->size() > 1; }

void DataParallel::launch(Bucket& b) {
  if (b.group->size() > 1) b.work = b.group->allreduce_async(b.data, b.numel, ElemType::f32, ReduceOp::avg);
  b.launched = true;
  launched_.push_back(size_t(&b - buckets_.data()));
}

void DataParallel::post_backward(Unit& u) {
  if (!sync_ || !reduces()) return;
  if (!armed_) {
    for (auto& b : buckets_) {
      b.pending = b.units.size();
      b.work.reset();
      b.launched = false;
    }
    launched_.clear();
    armed_ = true;
  }
  size_t k = 0;
  while (k < units_.size() && units_[k] != &u) ++k;
  DT_ASSERT(k < units_.size());
  Bucket& b = buckets_[bucket_of_[k]];
  DT_ASSERT(b.pending > 0);
  if (--b.pending == 0) launch(b);
}

void DataParallel::finish_gradients(const std::function<void(const std::vector<size_t>&)>& arrived) {
  if (!sync_ || !reduces()) {
    if (arrived)
      for (const auto& b : buckets_) arrived(b.units);
    return;
  }
  DT_ASSERT(armed_);
  for (auto& b : buckets_) {
    if (!b.launched) launch(b);  // a unit without a backward this step
  }
  double comm = 0.0, waited = 0.0;
  for (size_t i : launched_) {
    Bucket& b = buckets_[i];
    if (b.work) {
      const auto t0 = std::chrono::steady_clock::now();
      b.work->wait();
      waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      comm += b.work->seconds();
    }
    if (arrived) arrived(b.units);
  }
  stats_.exposed_seconds += waited;
  stats_.comm_seconds += comm;
  stats_.steps++;
  armed_ = false;
  if (keep_steps_) record_step(waited, comm);
}

void DataParallel::record_step(double waited, double comm) {
  step_records_.push_back({float(waited), float(comm)});
  if (step_records_.size() == kStepRecords) fold_step_records();  // the same step on every rank
}

void DataParallel::fold_step_records() {
  if (step_records_.empty()) return;
  static_assert(sizeof(step_records_[0]) == 2 * sizeof(float));  // the records as one float array
  group_.allreduce(step_records_.data()->data(), 2 * step_records_.size(), ReduceOp::min);
  for (const auto& [waited, comm] : step_records_) {
    least_.exposed_seconds += waited;
    least_.comm_seconds += comm;
  }
  least_.steps += int64_t(step_records_.size());
  step_records_.clear();
}

DdpFigures DataParallel::gather_figures() {
  if (!keep_steps_ || !reduces()) return {};
  fold_step_records();
  double waited = stats_.exposed_seconds;
  group_.allreduce(&waited, 1);
  DdpFigures f = least_;
  f.rank_wait_seconds = std::max(0.0, waited / group_.size() - f.exposed_seconds);
  return f;
}

}  // namespace dtrain
