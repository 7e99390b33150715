// FullyShardedDataParallel (see fsdp.hpp): shard geometry, the gather and gradient pools, and the
// hook state machine.
#include "parallel/fsdp/fsdp.hpp"

#include <algorithm>
#include <chrono>

#include "core/error.hpp"
#include "core/phase_clock.hpp"

namespace dtrain {

FullyShardedDataParallel::FullyShardedDataParallel(const std::vector<Unit*>& units, ProcessGroup& shard,
                                                   ProcessGroup* replicate, ComputeDevice& device,
                                                   const FsdpOptions& options, ProcessGroup* expert_shard)
    : units_(units), shard_(shard), replicate_(replicate && replicate->size() > 1 ? replicate : nullptr),
      dev_(device), o_(options), state_(units.size()) {
  if (o_.keep_for_step) {
    o_.reshard_after_forward = false;
    o_.accumulate = true;
  }
  require(o_.prefetch >= 0, "parallel.fsdp_prefetch = " + std::to_string(o_.prefetch) +
                                " must not be negative: use 0 (no prefetch) or e.g. 1");
  allocate(plan_shards(expert_shard));
}

// Each unit's group and shard length, and what sizes the pools.
FullyShardedDataParallel::Geometry FullyShardedDataParallel::plan_shards(ProcessGroup* expert_shard) {
  Geometry g;
  for (size_t k = 0; k < units_.size(); ++k) {
    UnitState& s = state_[k];
    s.unit = units_[k];
    s.group = s.unit->experts() && expert_shard ? expert_shard : &shard_;
    g.experts = g.experts || s.unit->experts();
    const int N = s.group->size();
    s.shard = (s.unit->numel() + N - 1) / N;  // a unit smaller than N leaves some shards all padding
    s.shard = std::max<int64_t>(s.shard, 1);
    total_shard_ += s.shard;
    max_shard_ = std::max(max_shard_, s.shard);
    g.max_padded = std::max(g.max_padded, padded(k));
    for (Unit* r : s.unit->reads()) s.reads.push_back(index_of(*r));
    g.max_reads = std::max(g.max_reads, s.reads.size());
  }
  return g;
}

// The shards, the gather pool and the gradient pools.
void FullyShardedDataParallel::allocate(const Geometry& g) {
  const int64_t max_padded = g.max_padded;
  param_shards_ = Buffer(dev_, sizeof(float) * size_t(total_shard_));
  grad_shards_ = Buffer(dev_, sizeof(float) * size_t(total_shard_));
  int64_t off = 0;
  for (UnitState& s : state_) {
    s.param_shard = param_shards_.f32() + off;
    s.grad_shard = grad_shards_.f32() + off;
    off += s.shard;
  }
  const size_t K = units_.size();
  // Full gradients bound at once without accumulation (see below), and bf16 reductions in flight.
  const size_t grads_in_flight = std::min(K, 3 + g.max_reads);
  // Gather pool: FULL_SHARD holds the running unit (and its module's experts), the prefetched ones and
  // what a unit's forward reads besides its own (a tied head: the embedding) in shared slots of the
  // largest unit's size; SHARD_GRAD_OP keeps every unit from forward to backward, each in a slot of
  // its own size.
  if (o_.reshard_after_forward) {
    const size_t n = std::min(K, std::max(size_t(1 + o_.prefetch + (g.experts ? 1 : 0)), 1 + g.max_reads));
    for (size_t i = 0; i < n; ++i) pool_.push_back({Buffer(dev_, sizeof(float) * size_t(max_padded)), max_padded, -1, Buffer()});
  } else {
    for (size_t k = 0; k < K; ++k) pool_.push_back({Buffer(dev_, sizeof(float) * size_t(padded(k))), padded(k), -1, Buffer()});
  }
  for (Slot& s : pool_) {
    // bf16 gathers: this rank's shard and then the gathered whole, as bf16, beside the f32 buffer
    if (o_.gather_bf16) s.half = Buffer(dev_, sizeof(uint16_t) * size_t(s.capacity + max_shard_));
    pool_bytes_ += int64_t(s.buf.size() + s.half.size());
  }
  // Full gradients: accumulating, one buffer per unit for the whole step; otherwise a small pool
  // (the unit in backward, the head and its tied embedding, whose gradients its fused loss writes
  // in forward, and the reductions in flight), a slot freed when its reduce-scatter ends.
  if (o_.accumulate) {
    for (size_t k = 0; k < K; ++k) {
      full_grads_.emplace_back(dev_, sizeof(float) * size_t(padded(k)));
      state_[k].full_grad = full_grads_.back().f32();
      grad_pool_bytes_ += padded(k) * int64_t(sizeof(float));
    }
  } else {
    for (size_t i = 0; i < grads_in_flight; ++i)
      grad_pool_.push_back({Buffer(dev_, sizeof(float) * size_t(max_padded)), max_padded, -1, Buffer()});
    for (const Slot& s : grad_pool_) grad_pool_bytes_ += s.capacity * int64_t(sizeof(float));
  }
  if (o_.reduce_bf16) {  // a bf16 copy of each full gradient in flight, and its reduced shard
    for (size_t i = 0; i < grads_in_flight; ++i) {
      half_pool_.push_back({Buffer(), max_padded, -1, Buffer(dev_, sizeof(uint16_t) * size_t(max_padded + max_shard_))});
      grad_pool_bytes_ += int64_t(half_pool_.back().half.size());
    }
  }
  for (size_t k = 0; k < K; ++k) units_[k]->bind(nullptr, state_[k].full_grad);
}

FullyShardedDataParallel::~FullyShardedDataParallel() {
  // Nothing may still write into buffers that are about to go (an error mid-step got us here).
  for (UnitState& s : state_) {
    try {
      if (s.gather) s.gather->wait();
      if (s.reduce) s.reduce->wait();
    } catch (...) {
    }
  }
  for (auto& w : replicating_) {
    try {
      w->wait();
    } catch (...) {
    }
  }
}

size_t FullyShardedDataParallel::index_of(const Unit& u) const {
  for (size_t k = 0; k < units_.size(); ++k)
    if (units_[k] == &u) return k;
  DT_ASSERT(false && "a unit FSDP does not manage");
  return 0;
}

void FullyShardedDataParallel::init_parameters(uint64_t seed) {
  std::vector<float> host;
  for (size_t k = 0; k < units_.size(); ++k) {
    const Unit& u = *units_[k];
    const int64_t lo = std::min(shard_offset(k), u.numel()), hi = std::min(lo + shard_numel(k), u.numel());
    host.assign(size_t(shard_numel(k)), 0.0f);  // padding past the unit's end stays zero
    init_unit_range(u, seed, lo, hi, host.data());
    dev_.upload(state_[k].param_shard, host.data(), sizeof(float) * host.size());
  }
  dev_.synchronize();
}

std::vector<ParamShard> FullyShardedDataParallel::shards() const {
  std::vector<ParamShard> v;
  for (const UnitState& s : state_) v.push_back({s.param_shard, s.grad_shard, s.shard});
  return v;
}

void FullyShardedDataParallel::zero_grad() {
  DT_ASSERT(reducing_.empty());
  dev_.zero(grad_shards_.data(), grad_shards_.size());
  for (Buffer& b : full_grads_) dev_.zero(b.data(), b.size());
  sync_ = true;
}

int FullyShardedDataParallel::take_slot(std::vector<Slot>& pool, int64_t floats, size_t owner) {
  for (size_t i = 0; i < pool.size(); ++i)
    if (pool[i].owner < 0 && pool[i].capacity >= floats) {
      pool[i].owner = int(owner);
      return int(i);
    }
  return -1;
}

void FullyShardedDataParallel::gather_async(size_t k) {
  UnitState& s = state_[k];
  if (s.slot >= 0) return;
  s.slot = take_slot(pool_, padded(k), k);
  DT_ASSERT(s.slot >= 0 && "FSDP gather pool exhausted");
  const std::vector<size_t> counts(size_t(s.group->size()), size_t(s.shard));
  Slot& slot = pool_[size_t(s.slot)];
  if (o_.gather_bf16) {
    uint16_t* half = static_cast<uint16_t*>(slot.half.data());
    dev_.to_bf16(s.param_shard, half + slot.capacity, s.shard);
    dev_.synchronize();  // the communication thread reads it next
    s.gather = s.group->allgather_async(half + slot.capacity, half, counts, ElemType::bf16);
  } else {
    s.gather = s.group->allgather_async(s.param_shard, slot.buf.f32(), counts, ElemType::f32);
  }
  ++gathered_units_;
  gathered_bytes_ += padded(k) * int64_t(sizeof(float));
  if (training_) stats_.gathered_bytes += padded(k) * int64_t(o_.gather_bf16 ? sizeof(uint16_t) : sizeof(float));
  stats_.gathered_units_peak = std::max(stats_.gathered_units_peak, gathered_units_);
  stats_.gathered_bytes_peak = std::max(stats_.gathered_bytes_peak, gathered_bytes_);
}

void FullyShardedDataParallel::wait_timed(const WorkPtr& w, double& comm_seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  w->wait();
  stats_.exposed_seconds += seconds_since(t0);
  comm_seconds += w->seconds();
}

void FullyShardedDataParallel::ensure_gathered(size_t k) {
  gather_async(k);
  UnitState& s = state_[k];
  Slot& slot = pool_[size_t(s.slot)];
  if (s.gather) {
    wait_timed(s.gather, stats_.gather_seconds);
    s.gather.reset();
    if (o_.gather_bf16) dev_.from_bf16(static_cast<const uint16_t*>(slot.half.data()), slot.buf.f32(), padded(k));
  }
  s.unit->bind(slot.buf.f32(), s.full_grad);
  if (o_.gather_bf16 && o_.bf16_weights) s.unit->bind_bf16(static_cast<uint16_t*>(slot.half.data()));
}

void FullyShardedDataParallel::release_params(size_t k) {
  UnitState& s = state_[k];
  if (s.slot < 0) return;
  if (s.gather) {  // prefetched but never used (an evaluation pass can end early)
    s.gather->wait();
    stats_.gather_seconds += s.gather->seconds();
    s.gather.reset();
  }
  pool_[size_t(s.slot)].owner = -1;
  s.slot = -1;
  --gathered_units_;
  gathered_bytes_ -= padded(k) * int64_t(sizeof(float));
  s.unit->bind(nullptr, s.full_grad);
  s.unit->bind_bf16(nullptr);
}

void FullyShardedDataParallel::bind_grad(size_t k) {
  UnitState& s = state_[k];
  if (s.full_grad) return;  // accumulating (always bound), or bound already this pass
  int slot;
  while ((slot = take_slot(grad_pool_, padded(k), k)) < 0) {
    DT_ASSERT(!reducing_.empty() && "FSDP gradient pool exhausted");
    complete_oldest_reduce();  // frees its slot
  }
  s.grad_slot = slot;
  s.full_grad = grad_pool_[size_t(slot)].buf.f32();
  dev_.zero(s.full_grad, sizeof(float) * size_t(padded(k)));
  full_grad_bytes_ += padded(k) * int64_t(sizeof(float));
  stats_.full_grad_bytes_peak = std::max(stats_.full_grad_bytes_peak, full_grad_bytes_);
  s.unit->bind(s.unit->param_data(), s.full_grad);
}

void FullyShardedDataParallel::launch_reduce(size_t k) {
  UnitState& s = state_[k];
  DT_ASSERT(s.full_grad && !s.reduce);
  const std::vector<size_t> counts(size_t(s.group->size()), size_t(s.shard));
  if (o_.reduce_bf16) {
    while ((s.half_slot = take_slot(half_pool_, padded(k), k)) < 0) complete_oldest_reduce();
    uint16_t* half = static_cast<uint16_t*>(half_pool_[size_t(s.half_slot)].half.data());
    dev_.to_bf16(s.full_grad, half, padded(k));
    dev_.synchronize();  // the communication thread reads it next
    s.reduce = s.group->reduce_scatter_async(half, half + half_pool_[size_t(s.half_slot)].capacity, counts, ElemType::bf16, ReduceOp::avg);
  } else {
    s.reduce = s.group->reduce_scatter_async(s.full_grad, s.grad_shard, counts, ElemType::f32, ReduceOp::avg);
  }
  reducing_.push_back(k);
}

// Reductions finish strictly in launch order, so every replica issues its all-reduces in the same order.
void FullyShardedDataParallel::complete_oldest_reduce() {
  const size_t k = reducing_.front();
  reducing_.pop_front();
  UnitState& s = state_[k];
  wait_timed(s.reduce, stats_.reduce_seconds);
  s.reduce.reset();
  if (s.half_slot >= 0) {
    Slot& h = half_pool_[size_t(s.half_slot)];
    dev_.from_bf16(static_cast<const uint16_t*>(h.half.data()) + h.capacity, s.grad_shard, s.shard);
    h.owner = -1;
    s.half_slot = -1;
  }
  if (s.grad_slot >= 0) {
    grad_pool_[size_t(s.grad_slot)].owner = -1;
    s.grad_slot = -1;
    s.full_grad = nullptr;
    full_grad_bytes_ -= padded(k) * int64_t(sizeof(float));
    s.unit->bind(s.unit->param_data(), nullptr);
  }
  if (replicate_)
    replicating_.push_back(replicate_->allreduce_async(s.grad_shard, size_t(s.shard), ElemType::f32, ReduceOp::avg));
}

void FullyShardedDataParallel::begin_pass(bool backward) {
  training_ = backward;
  DT_ASSERT(gathered_units_ == 0);
}

void FullyShardedDataParallel::pre_forward(Unit& u) {
  const size_t k = index_of(u);
  ensure_gathered(k);
  for (size_t r : state_[k].reads) ensure_gathered(r);
  // The last unit's fused loss writes its gradients (and those of what it reads) in forward.
  if (training_ && k + 1 == units_.size()) {
    bind_grad(k);
    for (size_t r : state_[k].reads) bind_grad(r);
  }
  for (size_t j = k + 1; j <= k + size_t(o_.prefetch) && j < units_.size(); ++j) gather_async(j);
}

void FullyShardedDataParallel::post_forward(Unit& u) {
  const size_t k = index_of(u);
  const bool last = k + 1 == units_.size();
  if (!training_) {  // evaluation: nothing is kept
    release_params(k);
    for (size_t r : state_[k].reads) release_params(r);
    return;
  }
  if (!o_.reshard_after_forward) return;  // SHARD_GRAD_OP: kept until backward
  for (size_t r : state_[k].reads) release_params(r);
  if (!last) release_params(k);  // the last unit's backward comes next
}

void FullyShardedDataParallel::pre_backward(Unit& u) {
  const size_t k = index_of(u);
  if (u.backward_reads_params()) ensure_gathered(k);
  bind_grad(k);
  // prefetch in backward order, skipping units whose backward needs no parameters
  size_t issued = 0;
  for (size_t j = k; j-- > 0 && issued < size_t(o_.prefetch);) {
    if (!units_[j]->backward_reads_params()) continue;
    gather_async(j);
    ++issued;
  }
}

void FullyShardedDataParallel::post_backward(Unit& u) {
  const size_t k = index_of(u);
  if (!sync_) {  // accumulating: the full gradient stays for the next micro-step
    DT_ASSERT(o_.accumulate);
    if (!o_.keep_for_step) release_params(k);  // (a pipeline's unit keeps its parameters for the step)
    return;
  }
  release_params(k);
  launch_reduce(k);
  while (!reducing_.empty() && state_[reducing_.front()].reduce->done()) complete_oldest_reduce();
}

void FullyShardedDataParallel::end_pass() {
  for (size_t k = 0; k < units_.size(); ++k) release_params(k);
  training_ = false;
}

void FullyShardedDataParallel::finish_gradients() {
  DT_ASSERT(sync_);
  while (!reducing_.empty()) complete_oldest_reduce();
  for (auto& w : replicating_) wait_timed(w, stats_.reduce_seconds);
  replicating_.clear();
  stats_.steps++;
}

const float* FullyShardedDataParallel::gather_full(size_t k, const float* shard) {
  const UnitState& s = state_[k];
  if (dev_.host_accessible()) {
    // Between passes every slot of the gather pool is free: the unit is gathered into one of them,
    // so a full-format save takes no memory beyond what training planned.
    const int slot = take_slot(pool_, padded(k), k);
    DT_ASSERT(slot >= 0 && "gather_full during a pass");
    pool_[size_t(slot)].owner = -1;
    float* whole = pool_[size_t(slot)].buf.f32();
    s.group->allgather(shard ? shard : s.param_shard, whole, size_t(s.shard), ElemType::f32);
    return whole;
  }
  // A device's pool is not host memory: through host buffers, kept for the next unit.
  if (!shard) {
    host_shard_.resize(size_t(s.shard));
    dev_.download(host_shard_.data(), s.param_shard, sizeof(float) * host_shard_.size());
    shard = host_shard_.data();
  }
  host_whole_.resize(size_t(padded(k)));
  s.group->allgather(shard, host_whole_.data(), size_t(s.shard), ElemType::f32);
  return host_whole_.data();
}

}  // namespace dtrain
