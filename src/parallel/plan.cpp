// ParallelModel (see plan.hpp).
#include "parallel/plan.hpp"

#include <algorithm>
#include <cmath>

#include "core/phase_clock.hpp"
#include "parallel/pp/stages.hpp"

namespace dtrain {

TpSlice tp_slice_of(const DeviceMesh& mesh, const ParallelPlan& plan) {
  return {mesh.shape().tp, mesh.coord().tp, plan.tp_sequence};
}

std::vector<Schedule> pipeline_schedules(const PipelineOptions& o, int pp) {
  const int M = o.microbatches > 0 ? o.microbatches : pp;
  Schedule full;
  if (!o.schedule_file.empty()) {
    full = read_schedule(o.schedule_file);
    require(full.pp == pp, "pipeline schedule " + o.schedule_file + " is for pp = " + std::to_string(full.pp) +
                               ", the mesh has parallel.pp = " + std::to_string(pp) + ": make one for this pp");
    require(o.microbatches <= 0 || full.microbatches == M,
            "pipeline schedule " + o.schedule_file + " runs " + std::to_string(full.microbatches) +
                " micro-batches, parallel.microbatches = " + std::to_string(M) + ": leave it unset or make them agree");
  } else {
    full = make_schedule(o.schedule, pp, o.virtual_stages, M);
  }
  // Only the shorter counts a run will see: a list for every count up to microbatches would grow
  // with its square (4096 micro-batches: billions of actions).
  std::vector<int> shorter;
  for (int64_t rows : o.batch_rows)
    if (rows > 0 && rows < full.microbatches) shorter.push_back(int(rows));
  std::sort(shorter.begin(), shorter.end());
  shorter.erase(std::unique(shorter.begin(), shorter.end()), shorter.end());
  std::vector<Schedule> lists;
  for (int n : shorter) {
    try {
      lists.push_back(o.schedule_file.empty() ? make_schedule(o.schedule, pp, o.virtual_stages, n)
                                              : forward_then_backward(full, n));
    } catch (const Error&) {  // e.g. fewer micro-batches than the schedule needs
      lists.push_back(forward_then_backward(full, n));
    }
  }
  lists.push_back(std::move(full));
  for (const Schedule& l : lists) {
    const std::vector<std::string> problems = validate(l);
    if (!problems.empty())
      throw Error("pipeline schedule " + l.name + " is not valid: " + problems.front() +
                  (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more problems)" : "") +
                  "; see every problem with `dtrain plan`");
  }
  return lists;
}

int64_t micro_batch_rows(int64_t batch, int microbatches) { return (batch + microbatches - 1) / microbatches; }

StagePlan pipeline_stage_plan(const UnitList& units, const PipelineOptions& o, const std::vector<Schedule>& lists,
                              int rank) {
  const Schedule& s = lists.back();
  const std::vector<double> costs = o.unit_costs.empty() ? units.unit_costs() : o.unit_costs;
  require(costs.size() == units.modules.size(),
          "parallel.pp_unit_costs lists " + std::to_string(costs.size()) + " costs, the model has " +
              std::to_string(units.modules.size()) + " units: give one per unit in model order (0 the input unit, " +
              std::to_string(units.modules.size() - 1) + " the loss unit)");
  const std::vector<int> bounds = cut_stages(costs, s.stages(), o.split);
  // Checked for the whole pipeline, so every rank finds the same problems (the model of one rank
  // alone could only see its own stages): a unit that reads another's parameters (a tied head)
  // must be on that unit's rank.
  std::vector<int> rank_of_unit(units.modules.size());
  for (int st = 0; st < s.stages(); ++st)
    for (int u = bounds[size_t(st)]; u < bounds[size_t(st + 1)]; ++u) rank_of_unit[size_t(u)] = s.stage_rank[size_t(st)];
  const std::vector<std::vector<int>> reads = units.reads();
  for (size_t u = 0; u < reads.size(); ++u)
    for (int r : reads[u])
      require(rank_of_unit[u] == rank_of_unit[size_t(r)],
              "unit " + units.modules[u]->unit().name() + " reads the parameters of unit " +
                  units.modules[size_t(r)]->unit().name() + " (a tied weight, e.g. model.tied = true), and the " +
                  "pipeline puts them on different ranks: that is not supported yet: untie them, or use " +
                  "parallel.pp = 1, or a schedule that keeps both on one rank (zb-v holds the first and last units on rank 0)");
  StagePlan plan;
  plan.stages = stage_ranges(bounds, s.stages_of(rank));
  for (const Schedule& l : lists) {
    plan.slots = std::max(plan.slots, l.slots()[size_t(rank)]);
    plan.split_backward = plan.split_backward || l.split_backward();
  }
  return plan;
}

ParallelModel::ParallelModel(const UnitFactory& make_units, int64_t max_batch, ComputeDevice& device,
                             DeviceMesh& mesh, const ParallelPlan& plan, const OptimizerConfig& optimizer, uint64_t seed,
                             size_t activation_limit)
    : mesh_(mesh), slice_(tp_slice_of(mesh, plan)) {
  const MeshShape& shape = mesh.shape();
  // 1. tensor parallel: this rank's slice of every layer, meeting the others over the tp group
  if (slice_.count > 1) regions_ = std::make_unique<TensorParallelRegions>(mesh.group(MeshDim::tp), slice_.sequence, plan.tp_overlap,
                                                       plan.tp_overlap_chunks);
  TpRegions& regions = regions_ ? static_cast<TpRegions&>(*regions_) : no_tp_regions();
  // context parallel: the blocks' attention reaches the other shares of the sequence
  if (shape.cp > 1) cp_ = std::make_unique<ContextParallel>(mesh.group(MeshDim::cp), plan.cp_mode, device);
  // expert parallel: the mixture-of-experts layers' tokens reach the experts held elsewhere
  if (shape.ep > 1) ep_ = std::make_unique<ExpertParallel>(mesh.ep());
  // 2. pipeline parallel: this rank's stages only, with the activation slots its schedule needs. The
  // layout is checked before any memory is taken, alike on every rank.
  UnitList units;
  std::vector<Schedule> lists;
  StagePlan stages;
  same_on_every_rank([&] {
    units = make_units(slice_, regions, cp_ ? &cp_->attention() : nullptr, ep_.get());
    if (cp_) sequence_shard(units.sample.targets, shape.cp, 0);  // ConfigError unless 2·cp divides T
    if (shape.pp > 1) {
      lists = pipeline_schedules(plan.pp, shape.pp);
      stages = pipeline_stage_plan(units, plan.pp, lists, mesh.coord().pp);
    }
  });
  stages.recompute = plan.recompute;
  // (a tp group, whose gathers carry such activations, lives within a node: one kind of CPU or GPU, one answer)
  stages.bf16_activations = plan.bf16_activations && device.bf16_products();
  stages.bf16_weights = plan.bf16_weights && device.bf16_products();
  stages.sequence_parts = shape.cp;
  if (shape.pp > 1) {
    const int64_t rows = micro_batch_rows(max_batch, lists.back().microbatches);  // each slot holds one micro-batch
    eval_pieces_ = (max_batch + rows - 1) / rows;
    max_batch = rows;
  }
  const size_t need = Model::planned_bytes(units, max_batch, stages);
  if (need > activation_limit) throw ActivationsDoNotFit(need, activation_limit);
  // 3. data parallel: sharded from the start (no rank ever holds the whole slice's parameters,
  // gradients or optimizer state), or replicated; context-parallel ranks hold the same parameters
  // and join in both
  if (shape.dp_shard > 1) {
    model_ = std::make_unique<Model>(std::move(units), max_batch, device, ParamStorage::bound_by_caller, stages);
    ProcessGroup* replicas = shape.dp_replicate > 1 ? &mesh.group(MeshDim::dp_replicate) : nullptr;
    FsdpOptions fsdp = plan.fsdp;
    fsdp.keep_for_step = shape.pp > 1;  // gathered once per step, not once per micro-batch
    fsdp.bf16_weights = stages.bf16_weights;
    fsdp_ = std::make_unique<FullyShardedDataParallel>(model_->units(), mesh.shard(), replicas, device, fsdp,
                                                       &mesh.expert_shard());
    if (plan.draw_weights) fsdp_->init_parameters(seed);
  } else {
    model_ = std::make_unique<Model>(std::move(units), max_batch, device, ParamStorage::owned, stages);
    if (plan.draw_weights) model_->init_weights(seed);
    if (shape.dp() * shape.cp > 1) {
      ddp_ = std::make_unique<DataParallel>(model_->units(), mesh.dp_cp(), plan.ddp_bucket_bytes, &mesh.expert_replicas());
      ddp_->keep_step_figures(device.kind() == DeviceKind::cpu);  // Gloo or MPI: timed on the host
    }
  }
  if (shape.pp > 1) {
    pipeline_ = std::make_unique<PipelineEngine>(*model_, std::move(lists), mesh.group(MeshDim::pp),
                                                 [this](bool on) { set_sync(on); });
    model_->time_units(true);  // the units' measured costs (gather_figures)
  }
  // 4. the optimizer over what this rank owns
  const std::vector<Unit*>& held = model_->units();
  const std::vector<ParamShard> shards = fsdp_ ? fsdp_->shards() : unit_shards(held);
  opt_ = std::make_unique<Optimizer>(optimizer, shards, device);
  for (size_t k = 0; k < held.size(); ++k)
    if (held[k]->experts()) expert_shards_.push_back(k);
  if (slice_.count > 1) {
    std::vector<ShardOf> where;
    for (size_t k = 0; k < held.size(); ++k) where.push_back({held[k], fsdp_ ? fsdp_->shard_offset(k) : 0});
    tp_grads_ = std::make_unique<TensorParallelGrads>(mesh.group(MeshDim::tp), shards, where, device);
  }
}

void ParallelModel::broadcast_parameters() {
  if (!ddp_) return;
  ddp_->broadcast_parameters();
  model_->refresh_bf16_weights();
}

UnitHooks* ParallelModel::hooks() { return fsdp_ ? static_cast<UnitHooks*>(fsdp_.get()) : ddp_.get(); }

UnitHooks* ParallelModel::eval_hooks() { return fsdp_.get(); }

void ParallelModel::zero_grad() {
  if (regions_) regions_->reset_stats();
  if (cp_) cp_->take_stats();  // evaluations' traffic not counted
  if (ep_) ep_->take_stats();
  if (fsdp_)
    fsdp_->zero_grad();
  else
    model_->zero_grad();
}

void ParallelModel::set_sync(bool on) {
  if (ddp_) ddp_->set_sync(on);
  if (fsdp_) fsdp_->set_sync(on);
}

StepContext ParallelModel::training_context(const StepContext& base, int64_t rows, int64_t before,
                                            int64_t step_rows, bool filler) const {
  const int dp = data_parallel();
  StepContext ctx = base;
  ctx.B = rows;
  ctx.training = true;
  ctx.sample_offset = mesh_.coord().dp_index(mesh_.shape()) + int64_t(dp) * before;
  ctx.sample_stride = dp;
  if (cp_) ctx = cp_->local(ctx);
  ctx.loss_scale = filler ? 0.0f : float(dp) / float(step_rows * ctx.T);
  return ctx;
}

void ParallelModel::forward_backward(const BatchView& whole, const StepContext& ctx, bool last_micro_step) {
  const BatchView batch = cp_ ? cp_->local(whole, ctx) : whole;
  if (!pipeline_) {
    set_sync(last_micro_step);
    model_->queue_forward_backward(batch, ctx, hooks());
    return;
  }
  // the batch's rows dealt into micro-batches as evenly as they go, each keyed by its samples'
  // global indices (so dropout draws what one pass of the whole batch would)
  const int64_t M = std::min<int64_t>(pipeline_->schedule().microbatches, ctx.B);
  micro_.clear();
  for (int64_t m = 0, row = 0; m < M; ++m) {
    const int64_t rows = ctx.B / M + (m < ctx.B % M ? 1 : 0);
    MicroBatch b{batch.slice(row, rows), ctx};
    b.ctx.B = rows;
    b.ctx.sample_offset = ctx.sample_offset + row * ctx.sample_stride;
    micro_.push_back(b);
    row += rows;
  }
  pipeline_->train(micro_, hooks(), last_micro_step);
}

double ParallelModel::take_loss() {
  double loss = pipeline_ ? pipeline_->take_loss() : model_->take_loss();
  if (cp_) cp_->sum(&loss, 1);
  return loss;
}

ExpertLoad ParallelModel::take_expert_load() {
  ExpertLoad load = model_->take_expert_load();
  if (load.empty()) return load;
  std::vector<double> v = load.tokens;
  v.insert(v.end(), load.dropped.begin(), load.dropped.end());
  v.push_back(load.balance_loss);
  v.push_back(load.samples);
  if (mesh_.dp_cp().size() > 1) mesh_.dp_cp().allreduce(v.data(), v.size());
  if (pipeline_) mesh_.group(MeshDim::pp).allreduce(v.data(), v.size());
  const auto tokens_end = v.begin() + ptrdiff_t(load.tokens.size());
  std::copy(v.begin(), tokens_end, load.tokens.begin());
  std::copy(tokens_end, tokens_end + ptrdiff_t(load.dropped.size()), load.dropped.begin());
  load.balance_loss = v[v.size() - 2];
  load.samples = v.back();
  return load;
}

EvalSums ParallelModel::eval_sums(const BatchView& whole, const StepContext& whole_ctx) {
  if (!cp_) return eval_pass(whole, whole_ctx);
  const StepContext ctx = cp_->local(whole_ctx);
  EvalSums sums = eval_pass(cp_->local(whole, ctx), ctx);
  double v[2] = {sums.loss, sums.metric};
  cp_->sum(v, 2);
  return {v[0], v[1]};
}

EvalSums ParallelModel::eval_pass(const BatchView& batch, const StepContext& ctx) {
  if (!pipeline_) return model_->forward_eval(batch, ctx, eval_hooks());
  // In pieces of a micro-batch's rows (the most an activation slot holds), always as many as a full
  // batch has: every rank of the mesh runs the same passes (a short batch repeats its first piece,
  // not counted), so that sharded parameters are gathered by all of them.
  EvalSums sums;
  const int64_t rows = model_->max_batch();
  for (int64_t piece = 0; piece < eval_pieces_; ++piece) {
    const bool counted = piece * rows < ctx.B;
    const int64_t row = counted ? piece * rows : 0;
    StepContext eval = ctx;
    eval.training = false;
    eval.B = std::min(rows, ctx.B - row);
    eval.sample_offset = ctx.sample_offset + row * ctx.sample_stride;
    const EvalSums s = pipeline_->forward_eval({batch.slice(row, eval.B), eval}, eval_hooks());
    if (counted) {
      sums.loss += s.loss;
      sums.metric += s.metric;
    }
  }
  return sums;
}

void ParallelModel::finish_gradients() {
  set_sync(true);
  if (ddp_) ddp_->finish_gradients();
  if (fsdp_) fsdp_->finish_gradients();
  if (tp_grads_) tp_grads_->finish_gradients();
  if (ep_) {
    for (size_t k : expert_shards_) {
      const ParamShard& s = opt_->shards()[k];
      model_->device().scale(s.grad, 1.0f / float(ep_->ranks()), s.numel);
    }
  }
  take_step_figures();
}

double ParallelModel::finish_and_update(float lr, double grad_clip) {
  auto clip = [&](double norm) {  // the gradients scaled down to grad_clip when their norm is above it
    if (norm > grad_clip) opt_->scale_grads(float(grad_clip / (norm + 1e-6)));
    return norm;
  };
  if (!updates_per_bucket()) {
    {
      PhaseScope phase(Phase::backward);  // the gradients' last reductions (their waits: comm)
      finish_gradients();
    }
    PhaseScope phase(Phase::optimizer);
    const double norm = grad_clip > 0 ? clip(grad_norm()) : 0.0;
    opt_->step(lr);
    return norm;
  }
  PhaseScope phase(Phase::optimizer);  // interleaved with the last buckets' waits (comm)
  set_sync(true);
  opt_->begin_step();
  double norm = 0.0;
  if (grad_clip > 0) {  // replicated gradients: the norm is this rank's sum, taken bucket by bucket
    ddp_->finish_gradients([&](const std::vector<size_t>& units) { opt_->square_grads(units); });
    norm = clip(std::sqrt(opt_->squared_grads_total()));
    opt_->update(lr);
  } else {  // a unit's shard is the unit's index (unit_shards)
    ddp_->finish_gradients([&](const std::vector<size_t>& units) { opt_->update(lr, units); });
  }
  take_step_figures();
  return norm;
}

void ParallelModel::take_step_figures() {
  if (regions_) {
    tp_train_ += regions_->stats();
    ++tp_steps_;
  }
  if (cp_) {
    cp_train_ += cp_->take_stats();
    ++cp_steps_;
  }
  if (ep_) {
    ep_train_ += ep_->take_stats();
    ++ep_steps_;
  }
}

// Under FSDP the shards' squares are summed over the shard ranks (replicas hold the same shards; the
// experts' shards are spread over the same ranks); replicated gradients are already whole, but for
// the experts, which the ep ranks split; tensor-parallel slices' are summed over the tp ranks
// (parameters every slice holds whole counted once).
double ParallelModel::grad_norm() {
  double sq = tp_grads_ ? tp_grads_->grad_sumsq_part() : opt_->grad_sumsq();
  if (ep_ && !fsdp_) {
    double experts = opt_->grad_sumsq(expert_shards_);
    sq -= experts;
    mesh_.ep().allreduce(&experts, 1);
    sq += experts;
  }
  if (fsdp_) fsdp_->shard_group().allreduce(&sq, 1);
  if (tp_grads_) mesh_.group(MeshDim::tp).allreduce(&sq, 1);
  if (pipeline_) mesh_.group(MeshDim::pp).allreduce(&sq, 1);  // each stage's units
  return std::sqrt(sq);
}

void ParallelModel::gather_figures() {
  if (ddp_) ddp_figures_ = ddp_->gather_figures();
  gather_pipeline_costs();
}

void ParallelModel::gather_pipeline_costs() {
  if (!pipeline_ || pipeline_->stats().passes == 0) return;
  const PipelineStats& p = pipeline_->stats();
  const size_t S = p.action_seconds.size(), U = size_t(model_->num_units());
  const std::vector<std::array<double, 2>>& units = model_->unit_seconds();
  std::vector<double> v(S * 8 + U, 0.0);  // per stage: 4 sums, 4 counts; per unit: seconds
  for (size_t s = 0; s < S; ++s)
    for (size_t op = 0; op < 4; ++op) {
      v[s * 8 + op] = p.action_seconds[s][op];
      v[s * 8 + 4 + op] = p.action_count[s][op];
    }
  for (size_t u = 0; u < U && u < units.size(); ++u) v[S * 8 + u] = units[u][0] + units[u][1];
  mesh_.group(MeshDim::pp).allreduce(v.data(), v.size());  // each stage and unit lives on one pp rank
  auto mean = [&](size_t s, size_t op) { return v[s * 8 + 4 + op] > 0 ? v[s * 8 + op] / v[s * 8 + 4 + op] : 0.0; };
  pp_stage_seconds_.assign(S, {});
  for (size_t s = 0; s < S; ++s) pp_stage_seconds_[s] = {mean(s, 0), mean(s, 1), mean(s, 2), mean(s, 3)};
  pp_unit_seconds_.assign(U, 0.0);
  for (size_t u = 0; u < U; ++u) pp_unit_seconds_[u] = v[S * 8 + u] / double(p.passes);
}

Json ParallelModel::figures(bool host_timing) const {
  Json s = Json::object();
  if (ddp_ && ddp_figures_.steps > 0 && host_timing) {
    const DdpFigures& d = ddp_figures_;
    s["ddp_ranks"] = mesh_.shape().dp() * mesh_.shape().cp;
    s["ddp_bytes_per_step"] = ddp_->stats().bytes;
    s["ddp_comm_seconds"] = d.comm_seconds;
    s["ddp_exposed_seconds"] = d.exposed_seconds;
    s["ddp_hidden_fraction"] = d.hidden_fraction();
    s["ddp_rank_wait_seconds"] = d.rank_wait_seconds;
  }
  if (regions_ && tp_steps_ > 0) {
    const double steps = double(tp_steps_);
    const TpStats& t = tp_train_;
    s["tp"] = mesh_.shape().tp;
    s["tp_sequence"] = slice_.splits_rows();
    s["tp_allreduce_bytes_per_step"] = double(t.allreduce_bytes) / steps;
    s["tp_allgather_bytes_per_step"] = double(t.allgather_bytes) / steps;
    s["tp_reduce_scatter_bytes_per_step"] = double(t.reduce_scatter_bytes) / steps;
    s["tp_collectives_per_step"] = double(t.collectives) / steps;
    s["tp_comm_seconds"] = t.seconds;  // exposed: the training thread waited
    s["tp_comm_busy_seconds"] = t.busy_seconds;
    s["tp_hidden_fraction"] = t.busy_seconds > 0 ? std::max(0.0, 1.0 - t.seconds / t.busy_seconds) : 0.0;
  }
  if (cp_ && cp_steps_ > 0) {
    const double steps = double(cp_steps_);
    const CpStats& c = cp_train_;
    s["cp"] = cp_->size();
    s["cp_mode"] = cp_mode_name(cp_->mode());
    s["cp_bytes_per_step"] = double(c.bytes) / steps;
    s["cp_transfers_per_step"] = double(c.transfers) / steps;
    s["cp_attention_seconds"] = c.attention_seconds;
    s["cp_comm_exposed_seconds"] = c.wait_seconds;  // the training thread waited for the ring or the all-to-alls
  }
  if (ep_ && ep_steps_ > 0) {
    const double steps = double(ep_steps_);
    s["ep"] = ep_->ranks();
    s["ep_bytes_per_step"] = double(ep_train_.bytes) / steps;
    s["ep_exchanges_per_step"] = double(ep_train_.exchanges) / steps;
    s["ep_comm_exposed_seconds"] = ep_train_.wait_seconds;  // the training thread waited for the all-to-alls
  }
  if (pipeline_ && pipeline_->stats().passes > 0) {
    const PipelineStats& p = pipeline_->stats();
    const Schedule& sch = pipeline_->schedule();
    s["pp"] = sch.pp;
    s["pp_schedule"] = sch.name;
    s["pp_virtual"] = sch.virtual_stages;
    s["pp_microbatches"] = sch.microbatches;
    s["pp_idle_share"] = p.idle_share();  // this rank's
    s["pp_simulated_bubble"] = simulate(sch).mean_bubble;
    if (!pp_stage_seconds_.empty()) {
      ActionCosts measured;
      measured.stages = pp_stage_seconds_;
      const Simulation sim = simulate(sch, measured);
      s["pp_simulated_bubble_measured"] = sim.mean_bubble;
      s["pp_simulated_bubble_measured_by_rank"] = sim.bubble;  // pp_idle_share is this rank's
      Json stages = Json::array();
      for (const StageCosts& c : pp_stage_seconds_)
        stages.push_back({{"F", 1e3 * c.F}, {"B", 1e3 * c.B}, {"I", 1e3 * c.I}, {"W", 1e3 * c.W}});
      s["pp_stage_ms"] = stages;  // mean milliseconds of each stage's actions
      std::string costs;
      for (double u : pp_unit_seconds_) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4g", 1e3 * u);
        costs += (costs.empty() ? "" : ",") + std::string(buf);
      }
      s["pp_unit_costs"] = costs;  // milliseconds per pass, as parallel.pp_unit_costs takes them
    }
    s["pp_bytes_sent_per_pass"] = double(p.bytes_sent) / double(p.passes);
  }
  if (fsdp_) {
    const FsdpStats& f = fsdp_->stats();
    const double comm = f.gather_seconds + f.reduce_seconds;
    s["fsdp_gather_seconds"] = f.gather_seconds;
    s["fsdp_reduce_seconds"] = f.reduce_seconds;
    s["fsdp_exposed_seconds"] = f.exposed_seconds;
    s["fsdp_hidden_fraction"] = comm > 0 ? std::max(0.0, 1.0 - f.exposed_seconds / comm) : 0.0;
    s["fsdp_gathered_units_peak"] = f.gathered_units_peak;
    s["fsdp_gathered_bytes_peak"] = f.gathered_bytes_peak;
    s["fsdp_gathered_bytes_per_step"] = f.steps > 0 ? double(f.gathered_bytes) / double(f.steps) : 0.0;
    s["fsdp_full_grad_bytes_peak"] = f.full_grad_bytes_peak;
    s["fsdp_shard_bytes"] = fsdp_->shard_bytes();
    s["fsdp_pool_bytes"] = fsdp_->pool_bytes();
    s["fsdp_grad_pool_bytes"] = fsdp_->grad_pool_bytes();
    s["optimizer_state_bytes"] = opt_->state_bytes();
  }
  return s;
}

}  // namespace dtrain
