// The one place a parallel plan is applied (DESIGN §3), in a fixed order: the model is built as this
// rank's tensor-parallel slice, then sharded by FSDP over dp_shard (each rank's slice) or replicated
// with DDP over the data-parallel ranks, and the optimizer steps what this rank owns. What a
// training step needs of the result lives here too: hooks, zeroing and finishing gradients, the
// global gradient norm; and, after the run, what each strategy moved.
#pragma once
#include <cstdint>
#include <memory>

#include "comm/mesh.hpp"
#include "core/json.hpp"
#include "optim/optimizer.hpp"
#include "parallel/ddp/ddp.hpp"
#include "parallel/fsdp/fsdp.hpp"
#include "parallel/tp/grads.hpp"
#include "parallel/tp/regions.hpp"

namespace dtrain {

// How the strategies are set up; which of them apply comes from the mesh's shape.
struct ParallelPlan {
  bool tp_sequence = false;            // tensor parallel: rows of norms, dropout, residuals split too
  FsdpOptions fsdp;                    // dp_shard > 1
  size_t ddp_bucket_bytes = 25 << 20;  // dp > 1 without sharding
};

// This rank's tensor-parallel slice of the model on `mesh`.
TpSlice tp_slice_of(const DeviceMesh& mesh, const ParallelPlan& plan);

class ParallelModel {
 public:
  // Collective over the mesh. The model is planned for batches of up to max_batch samples, on
  // `device`, with the one-process initial weights of `seed` (sliced and sharded as this rank holds
  // them); throws std::bad_alloc when its memory cannot be had.
  ParallelModel(const ModelConfig& config, int64_t max_batch, ComputeDevice& device, DeviceMesh& mesh,
                const ParallelPlan& plan, const OptimizerConfig& optimizer, uint64_t seed);

  TransformerLM& model() { return *model_; }
  Optimizer& optimizer() { return *opt_; }
  FullyShardedDataParallel* fsdp() { return fsdp_.get(); }        // dp_shard > 1
  DataParallel* ddp() { return ddp_.get(); }                      // replicated data parallel
  TensorParallelRegions* tp_regions() { return regions_.get(); }  // tp > 1

  // DDP: every replica takes data-parallel rank 0's weights (call once any checkpoint is loaded).
  void broadcast_parameters();
  UnitHooks* hooks();       // training passes
  UnitHooks* eval_hooks();  // evaluation passes (FSDP gathers; DDP has nothing to do)
  void zero_grad();  // a step begins
  // Off: gradients only accumulate locally (the non-final micro-steps of gradient accumulation).
  void set_sync(bool last_micro_step);
  // After a step's last micro-step: gradients averaged over the data-parallel ranks, and those a
  // tensor-parallel slice holds only its rows' share of summed over the slices.
  void finish_gradients();
  // The global gradient norm (collective over the shard and tp ranks).
  double grad_norm();
  // After the run: a line per strategy on what it moved in training steps (and how much of it the
  // computation hid), printed, with the same figures into `summary` (summary.json). host_timing:
  // the collectives ran on the host's clock (Gloo), so overlap measured there means something.
  void report(Json& summary, bool host_timing) const;

 private:
  DeviceMesh& mesh_;
  std::unique_ptr<TensorParallelRegions> regions_;  // before the model, which refers to it
  std::unique_ptr<TransformerLM> model_;
  std::unique_ptr<FullyShardedDataParallel> fsdp_;
  std::unique_ptr<DataParallel> ddp_;
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<TensorParallelGrads> tp_grads_;
  TpStats tp_train_;      // the regions' traffic from zero_grad to finish_gradients (evaluations not counted)
  int64_t tp_steps_ = 0;  // the steps it is of
};

}  // namespace dtrain
