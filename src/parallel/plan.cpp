// ParallelModel (see plan.hpp).
#include "parallel/plan.hpp"

#include <cmath>

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

}  // namespace dtrain
