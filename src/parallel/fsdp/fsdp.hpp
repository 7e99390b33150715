// Fully sharded data parallel (FULL_SHARD / SHARD_GRAD_OP, and hybrid across replicas): each rank
// keeps 1/N of every unit's flat parameters and gradients (and, through the optimizer, its state);
// hooks gather a unit's parameters into a pooled full buffer for its forward and backward, with the
// next units' gathers in flight, and reduce-scatter its gradients into the shard after backward.
// Expert units (Unit::experts) are split over the ranks that hold the same experts instead.
#pragma once
#include <deque>
#include <vector>

#include "comm/process_group.hpp"
#include "nn/model.hpp"
#include "optim/optimizer.hpp"

namespace dtrain {

struct FsdpOptions {
  int prefetch = 1;                   // units whose gather is issued ahead of the running one
  bool reshard_after_forward = true;  // false: SHARD_GRAD_OP (parameters kept from forward to backward)
  bool accumulate = false;            // gradient accumulation: full gradients kept across micro-steps
  bool gather_bf16 = false;           // gather parameters as bf16 (half the bytes); shards stay f32
  // With gather_bf16: bf16 products read the gathered bf16 parameters (Unit::bind_bf16), the same
  // values they would round the widened ones to.
  bool bf16_weights = false;
  bool reduce_bf16 = false;           // reduce gradients in bf16 instead of f32
  // Pipeline parallel: a unit runs once per micro-batch, so its parameters stay gathered (and its
  // full gradient accumulates) from its first forward of a step to its last backward, gathered
  // once per step. Implies SHARD_GRAD_OP's pool and accumulation.
  bool keep_for_step = false;
};

// What one rank holds and moves, from its own allocations.
struct FsdpStats {
  int64_t steps = 0;
  double gather_seconds = 0.0;   // all-gathers on the communication thread
  double reduce_seconds = 0.0;   // reduce-scatters (and the replicas' all-reduces)
  double exposed_seconds = 0.0;  // time the computation waited for either
  int64_t gathered_units_peak = 0;  // units whose full parameters were held at once, at most
  int64_t gathered_bytes_peak = 0;  // their bytes
  int64_t full_grad_bytes_peak = 0;  // full (unsharded) gradient buffers bound at once, at most
  int64_t gathered_bytes = 0;        // parameter bytes all-gathered (as sent: bf16 or f32) in training passes
};

class FullyShardedDataParallel : public UnitHooks {
 public:
  // units in forward order, their storage left to this object (ParamStorage::bound_by_caller);
  // shard: the ranks that split every unit (expert units: expert_shard, when given); replicate: the
  // ranks that hold the same shard (HSDP), or null. Shard buffers, the gather pool and the gradient
  // pool are all allocated here.
  FullyShardedDataParallel(const std::vector<Unit*>& units, ProcessGroup& shard, ProcessGroup* replicate,
                           ComputeDevice& device, const FsdpOptions& options, ProcessGroup* expert_shard = nullptr);
  ~FullyShardedDataParallel() override;

  // Every shard made directly with the one-process initial values of its elements (DESIGN §3.4).
  void init_parameters(uint64_t seed);
  // This rank's shard of each unit, for the optimizer (parameter, gradient, padded length).
  std::vector<ParamShard> shards() const;

  void zero_grad();                                  // before a step's first micro-step
  void set_sync(bool last_micro_step) { sync_ = last_micro_step; }  // off: gradients stay local
  // Waits for every reduction: the gradient shards then hold the average over the data-parallel ranks.
  void finish_gradients();

  // Geometry: unit k's flat buffer padded to shard_numel(k) · shard ranks; this rank holds
  // [shard_offset(k), shard_offset(k) + shard_numel(k)) of it.
  size_t num_units() const { return units_.size(); }
  int64_t shard_numel(size_t k) const { return state_[k].shard; }
  int64_t shard_offset(size_t k) const { return state_[k].shard * state_[k].group->rank(); }
  float* param_shard(size_t k) const { return state_[k].param_shard; }
  // Collective over the shard ranks, between passes: unit k's whole parameters (shard null), or the
  // whole of any host buffer laid out like its shard (optimizer state), as host memory valid until
  // the next call or pass. On the CPU it is a slot of the gather pool (no memory of its own).
  const float* gather_full(size_t k, const float* shard = nullptr);

  // Bytes this rank allocated: parameter and gradient shards, the gather pool, the gradient pool.
  int64_t shard_bytes() const { return 2 * total_shard_ * int64_t(sizeof(float)); }
  int64_t pool_bytes() const { return pool_bytes_; }
  int64_t grad_pool_bytes() const { return grad_pool_bytes_; }
  const FsdpStats& stats() const { return stats_; }
  ProcessGroup& shard_group() { return shard_; }  // (expert units': a part of it)
  ProcessGroup* replicate_group() { return replicate_; }

  void begin_pass(bool backward) override;
  void pre_forward(Unit& u) override;
  void post_forward(Unit& u) override;
  void pre_backward(Unit& u) override;
  void post_backward(Unit& u) override;
  void end_pass() override;

 private:
  struct Slot {
    Buffer buf;
    int64_t capacity = 0;  // elements
    int owner = -1;        // unit index, -1 free
    Buffer half;           // bf16 transfers: what is sent and received (gathers: shard, then the whole;
                           // reductions: the whole, then the shard)
  };
  struct UnitState {
    Unit* unit = nullptr;
    ProcessGroup* group = nullptr;  // the ranks that split it
    int64_t shard = 0;             // floats per rank (padded)
    float* param_shard = nullptr;
    float* grad_shard = nullptr;
    int slot = -1;                 // gather pool slot holding the full parameters
    WorkPtr gather;                // the all-gather into it, until waited
    int grad_slot = -1;            // gradient pool slot bound as the full gradient
    float* full_grad = nullptr;    // the bound full gradient (pool slot or, accumulating, own buffer)
    WorkPtr reduce;                // reduce-scatter in flight
    int half_slot = -1;            // bf16 reductions: its staging slot
    std::vector<size_t> reads;     // units whose parameters its forward reads
  };
  struct Geometry {
    int64_t max_padded = 0;  // the largest unit's padded length
    size_t max_reads = 0;    // the most units another's forward reads
    bool experts = false;    // any expert unit (held beside its module's unit)
  };
  Geometry plan_shards(ProcessGroup* expert_shard);
  void allocate(const Geometry& g);
  size_t index_of(const Unit& u) const;
  int64_t padded(size_t k) const { return state_[k].shard * state_[k].group->size(); }
  void gather_async(size_t k);
  void ensure_gathered(size_t k);
  void release_params(size_t k);
  void bind_grad(size_t k);
  void launch_reduce(size_t k);
  void complete_oldest_reduce();
  void wait_timed(const WorkPtr& w, double& comm_seconds);
  int take_slot(std::vector<Slot>& pool, int64_t floats, size_t owner);

  std::vector<Unit*> units_;
  ProcessGroup& shard_;
  ProcessGroup* replicate_;
  ComputeDevice& dev_;
  FsdpOptions o_;
  std::vector<UnitState> state_;
  Buffer param_shards_, grad_shards_;
  int64_t total_shard_ = 0;
  std::vector<Slot> pool_, grad_pool_, half_pool_;  // half_pool_: bf16 reduction staging
  std::vector<Buffer> full_grads_;  // accumulating: one per unit
  std::vector<float> host_shard_, host_whole_;  // gather_full on a device: its host copies
  int64_t pool_bytes_ = 0, grad_pool_bytes_ = 0;
  int64_t max_shard_ = 0;
  std::deque<size_t> reducing_;     // units whose reduce-scatter is in flight, in launch order
  std::vector<WorkPtr> replicating_;  // HSDP all-reduces of finished shards
  bool training_ = false, sync_ = true;
  int64_t gathered_units_ = 0, gathered_bytes_ = 0, full_grad_bytes_ = 0;
  FsdpStats stats_;
};

}  // namespace dtrain
