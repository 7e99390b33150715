// build_rank and distinct_ranks (see rank_build.hpp).
#include "train/plan/rank_build.hpp"

#include <algorithm>

#include "kernels/counting_device.hpp"
#include "train/model_plan.hpp"
#include "train/train_step.hpp"

namespace dtrain {

namespace {

RankWork work_of(ParallelModel& par, const BatchSplit& split) {
  RankWork w;
  Model& model = par.model();
  StepContext ctx;
  ctx.B = model.max_batch();
  ctx.T = model.sample_shape().targets;
  w.hidden_floats = model.unit_output_floats(0, ctx);
  const PipelineEngine* pipe = par.pipeline();
  w.passes = split.accum * (pipe ? pipe->schedule().microbatches : 1);
  for (int k = 0; k < model.num_stages(); ++k) {
    const auto [first, last] = model.stage_units(k);
    double flops = 0.0;
    for (int u = first; u < last; ++u) flops += model.unit_flops(u);
    w.stage_flops.push_back(flops);
  }
  return w;
}

// One optimizer step of the run's own step code (train_step) over batches of zeros.
void run_step(ParallelModel& par, const ModelKind& kind, const RunConfig& cfg, const BatchSplit& split, int dp,
              Precision precision) {
  Batch batch;
  batch.shape = par.model().sample_shape();
  batch.samples = split.micro_batch;
  const size_t inputs = size_t(split.micro_batch * batch.shape.inputs);
  if (batch.shape.input == InputKind::tokens)
    batch.tokens.assign(inputs, 0);
  else
    batch.pixels.assign(inputs, 0.0f);
  batch.targets.assign(size_t(split.micro_batch * batch.shape.targets), 0);
  StepSpec spec;
  spec.base.T = batch.shape.targets;
  spec.base.dropout = kind.dropout(cfg.model);  // as the trainer's step context has it
  spec.base.seed = cfg.train.seed;
  spec.base.precision = precision;
  spec.micro = split.accum;
  spec.samples = split.global(dp);
  spec.micro_batch = split.micro_batch;
  spec.total_steps = 1;
  spec.grad_clip = cfg.optim.grad_clip;
  train_step(par, spec, [&]() -> Batch& { return batch; });
}

}  // namespace

RankBuild build_rank(const PlanJob& job, const Layout& layout, int rank, const Hardware& h) {
  const RunConfig cfg = with_layout(job, layout);
  cfg.validate();
  const BatchSplit split = batch_split_of(cfg, layout.shape);
  ParallelPlan plan = parallel_plan_of(cfg, job.precision, split.accum, {split.micro_batch});
  plan.draw_weights = false;
  CountingDevice dev;
  if (h.device == "cpu") dev.plan_scratch(cpu_scratch_model(h.bf16_products));  // (CUDA's workspaces: not modelled)
  dev.set_bf16_products_copy_f32_operands(h.device == "cpu");
  dev.set_bf16_products(h.bf16_products);
  StepClock clock(h);
  const std::unique_ptr<DeviceMesh> mesh = DeviceMesh::stand_in(layout.shape, rank, &clock);
  const UnitFactory units = model_units_of(*job.kind, cfg.model, dev, plan.recompute);
  ParallelModel par(units, split.micro_batch, dev, *mesh, plan, cfg.optim, cfg.train.seed);
  RankBuild b;
  b.rank = rank;
  b.coord = mesh->coord();
  b.work = work_of(par, split);
  dev.on_kernel([&clock](const KernelWork& w) { clock.kernel(w); });
  run_step(par, *job.kind, cfg, split, layout.shape.dp(), job.precision);
  b.work.step = clock.tally();
  // after the step: what grows on the first pass (context parallel's exchange buffers, the kernels'
  // scratch) has grown
  b.memory = model_memory(par);
  b.memory.kernel_scratch = int64_t(dev.kernel_scratch_bytes());
  return b;
}

std::vector<int> distinct_ranks(const MeshShape& shape) {
  std::vector<int> ranks;
  for (int pp = 0; pp < shape.pp; ++pp)
    for (int tp : {0, shape.tp - 1}) {
      MeshCoord c;
      c.pp = pp;
      c.tp = tp;
      ranks.push_back(mesh_rank(shape, c));
    }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

}  // namespace dtrain
