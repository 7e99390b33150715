// ParallelModel (see plan.hpp).
#include "parallel/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dtrain {

TpSlice tp_slice_of(const DeviceMesh& mesh, const ParallelPlan& plan) {
  return {mesh.shape().tp, mesh.coord().tp, plan.tp_sequence};
}

ParallelModel::ParallelModel(const ModelConfig& config, int64_t max_batch, ComputeDevice& device, DeviceMesh& mesh,
                             const ParallelPlan& plan, const OptimizerConfig& optimizer, uint64_t seed)
    : mesh_(mesh) {
  const MeshShape& shape = mesh.shape();
  // 1. tensor parallel: this rank's slice of every layer, meeting the others over the tp group
  const TpSlice slice = tp_slice_of(mesh, plan);
  if (slice.count > 1) regions_ = std::make_unique<TensorParallelRegions>(mesh.group(MeshDim::tp), slice.sequence);
  TpRegions& regions = regions_ ? static_cast<TpRegions&>(*regions_) : no_tp_regions();
  // 2. data parallel: sharded from the start (no rank ever holds the whole slice's parameters,
  // gradients or optimizer state), or replicated
  if (shape.dp_shard > 1) {
    model_ = std::make_unique<TransformerLM>(config, max_batch, device, ParamStorage::bound_by_caller, slice, regions);
    ProcessGroup* replicas = shape.dp_replicate > 1 ? &mesh.group(MeshDim::dp_replicate) : nullptr;
    fsdp_ = std::make_unique<FullyShardedDataParallel>(model_->units(), mesh.group(MeshDim::dp_shard), replicas, device,
                                                       plan.fsdp);
    fsdp_->init_parameters(seed);
  } else {
    model_ = std::make_unique<TransformerLM>(config, max_batch, device, ParamStorage::owned, slice, regions);
    model_->init_weights(seed);
    if (shape.dp() > 1) ddp_ = std::make_unique<DataParallel>(model_->units(), mesh.dp(), plan.ddp_bucket_bytes);
  }
  // 3. the optimizer over what this rank owns
  const std::vector<Unit*>& units = model_->units();
  const std::vector<ParamShard> shards = fsdp_ ? fsdp_->shards() : unit_shards(units);
  opt_ = std::make_unique<Optimizer>(optimizer, shards, device);
  if (slice.count > 1) {
    std::vector<ShardOf> where;
    for (size_t k = 0; k < units.size(); ++k) where.push_back({units[k], fsdp_ ? fsdp_->shard_offset(k) : 0});
    tp_grads_ = std::make_unique<TensorParallelGrads>(mesh.group(MeshDim::tp), shards, where, device);
  }
}

void ParallelModel::broadcast_parameters() {
  if (ddp_) ddp_->broadcast_parameters();
}

UnitHooks* ParallelModel::hooks() { return fsdp_ ? static_cast<UnitHooks*>(fsdp_.get()) : ddp_.get(); }

UnitHooks* ParallelModel::eval_hooks() { return fsdp_.get(); }

void ParallelModel::zero_grad() {
  if (regions_) regions_->reset_stats();
  if (fsdp_)
    fsdp_->zero_grad();
  else
    model_->zero_grad();
}

void ParallelModel::set_sync(bool last_micro_step) {
  if (ddp_) ddp_->set_sync(last_micro_step);
  if (fsdp_) fsdp_->set_sync(last_micro_step);
}

void ParallelModel::finish_gradients() {
  if (ddp_) ddp_->finish_gradients();
  if (fsdp_) fsdp_->finish_gradients();
  if (tp_grads_) tp_grads_->finish_gradients();
  if (regions_) {
    tp_train_ += regions_->stats();
    ++tp_steps_;
  }
}

// Under FSDP the shards' squares are summed over the shard ranks (replicas hold the same shards);
// replicated gradients are already whole; tensor-parallel slices' are summed over the tp ranks
// (parameters every slice holds whole counted once).
double ParallelModel::grad_norm() {
  double sq = tp_grads_ ? tp_grads_->grad_sumsq_part() : opt_->grad_sumsq();
  if (fsdp_) fsdp_->shard_group().allreduce(&sq, 1);
  if (tp_grads_) mesh_.group(MeshDim::tp).allreduce(&sq, 1);
  return std::sqrt(sq);
}

void ParallelModel::report(Json& s, bool host_timing) const {
  if (ddp_ && ddp_->stats().steps > 0 && host_timing) {
    const DdpStats& d = ddp_->stats();
    const double hidden = d.comm_seconds > 0 ? std::max(0.0, 1.0 - d.exposed_seconds / d.comm_seconds) : 0.0;
    std::printf("data parallel: %d ranks, %.1f MB of gradients per step; allreduce %.2f s in all, %.2f s of it "
                "exposed after backward (%.0f%% hidden)\n",
                mesh_.shape().dp(), double(d.bytes) / 1e6, d.comm_seconds, d.exposed_seconds, 100.0 * hidden);
    s["ddp_comm_seconds"] = d.comm_seconds;
    s["ddp_exposed_seconds"] = d.exposed_seconds;
    s["ddp_hidden_fraction"] = hidden;
  }
  if (regions_ && tp_steps_ > 0) {
    const double steps = double(tp_steps_);
    const TpStats& t = tp_train_;
    std::printf("tensor parallel: per step and rank %.2f MB all-reduced, %.2f MB all-gathered, %.2f MB "
                "reduce-scattered in %.0f collectives; %.2f s waiting in all\n",
                double(t.allreduce_bytes) / steps / 1e6, double(t.allgather_bytes) / steps / 1e6,
                double(t.reduce_scatter_bytes) / steps / 1e6, double(t.collectives) / steps, t.seconds);
    s["tp"] = mesh_.shape().tp;
    s["tp_sequence"] = model_->tp_slice().splits_rows();
    s["tp_allreduce_bytes_per_step"] = double(t.allreduce_bytes) / steps;
    s["tp_allgather_bytes_per_step"] = double(t.allgather_bytes) / steps;
    s["tp_reduce_scatter_bytes_per_step"] = double(t.reduce_scatter_bytes) / steps;
    s["tp_collectives_per_step"] = double(t.collectives) / steps;
    s["tp_comm_seconds"] = t.seconds;
  }
  if (fsdp_) {
    const FsdpStats& f = fsdp_->stats();
    const double comm = f.gather_seconds + f.reduce_seconds;
    const double hidden = comm > 0 ? std::max(0.0, 1.0 - f.exposed_seconds / comm) : 0.0;
    std::printf("fully sharded: all-gather %.2f s, reduce-scatter %.2f s, %.2f s of it exposed (%.0f%% hidden); "
                "at most %lld units (%.1f MB) gathered at once\n",
                f.gather_seconds, f.reduce_seconds, f.exposed_seconds, 100.0 * hidden,
                (long long)f.gathered_units_peak, double(f.gathered_bytes_peak) / 1e6);
    s["fsdp_gather_seconds"] = f.gather_seconds;
    s["fsdp_reduce_seconds"] = f.reduce_seconds;
    s["fsdp_exposed_seconds"] = f.exposed_seconds;
    s["fsdp_hidden_fraction"] = hidden;
    s["fsdp_gathered_units_peak"] = f.gathered_units_peak;
    s["fsdp_gathered_bytes_peak"] = f.gathered_bytes_peak;
    s["fsdp_full_grad_bytes_peak"] = f.full_grad_bytes_peak;
    s["fsdp_shard_bytes"] = fsdp_->shard_bytes();
    s["fsdp_pool_bytes"] = fsdp_->pool_bytes();
    s["fsdp_grad_pool_bytes"] = fsdp_->grad_pool_bytes();
    s["optimizer_state_bytes"] = opt_->state_bytes();
  }
}

}  // namespace dtrain
