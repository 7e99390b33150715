// parallel_plan_of and model_units_of (see model_plan.hpp).
#include "train/model_plan.hpp"

namespace dtrain {

ParallelPlan parallel_plan_of(const RunConfig& cfg, Precision precision, int64_t accum,
                              std::vector<int64_t> batch_rows) {
  ParallelPlan plan;
  plan.tp_sequence = cfg.parallel.tp_sequence;
  plan.tp_overlap = cfg.parallel.tp_overlap;
  plan.tp_overlap_chunks = int(cfg.parallel.tp_overlap_chunks);
  plan.recompute = cfg.train.recompute_mode();
  plan.cp_mode = cp_mode(cfg.parallel.cp_mode);
  plan.fsdp.prefetch = int(cfg.parallel.fsdp_prefetch);
  plan.fsdp.reshard_after_forward = cfg.parallel.fsdp_reshard_after_forward;
  plan.fsdp.accumulate = accum > 1;
  plan.fsdp.gather_bf16 = precision == Precision::bf16;  // master shards and optimizer state stay f32
  plan.bf16_activations = precision == Precision::bf16;
  plan.bf16_weights = precision == Precision::bf16;
  plan.fsdp.reduce_bf16 = cfg.parallel.fsdp_reduce_dtype == "bf16";
  plan.ddp_bucket_bytes = size_t(cfg.parallel.bucket_mb * (1 << 20));
  plan.pp.schedule = cfg.parallel.pp_schedule;
  plan.pp.schedule_file = cfg.parallel.pp_schedule_file;
  plan.pp.virtual_stages = int(cfg.parallel.pp_virtual);
  plan.pp.microbatches = int(cfg.parallel.microbatches);
  plan.pp.split = cfg.pp_split_units();
  plan.pp.unit_costs = cfg.pp_unit_cost_list();
  plan.pp.batch_rows = std::move(batch_rows);
  return plan;
}

UnitFactory model_units_of(const ModelKind& kind, const ModelConfig& model, ComputeDevice& device, Recompute recompute) {
  return [&kind, &model, &device, recompute](TpSlice slice, TpRegions& regions, SequenceAttention* sequence,
                                             ExpertExchange* experts) {
    UnitList u = kind.units(model, device, slice, regions, sequence, experts);
    if (recompute == Recompute::selective && !u.recomputes_selectively())
      throw ConfigError("train.recompute = selective: model.kind = " + kind.name() +
                        " has no attention or activation it could recompute selectively: use "
                        "train.recompute = full (each hidden unit's forward again in its backward) or none");
    return u;
  };
}

}  // namespace dtrain
