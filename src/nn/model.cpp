// Model (see model.hpp): planning the held units and their stages, storage, and the passes over
// stages with hooks, slots and the split backward.
#include "nn/model.hpp"

#include <algorithm>

#include "core/trace.hpp"

namespace dtrain {

namespace {

int64_t global_numel(Module& m) {
  int64_t n = 0;
  for (const Unit* u : m.units()) {
    n += u->skipped_numel();
    for (const ParamInfo& p : u->params()) n += shape_numel(p.global_shape);
  }
  return n;
}

// The pass shape at its largest: max_batch samples of the model's rows per sample (context parallel:
// of the share a pass holds).
StepContext largest_pass(const SampleShape& sample, int64_t max_batch, int sequence_parts) {
  StepContext ctx;
  ctx.B = max_batch;
  ctx.T = sample.targets / sequence_parts;  // each target is a row of the loss
  return ctx;
}

// fn for each of a module's units (its own, then its experts'), as the hooks see them.
template <class Fn>
void each_unit(Module& m, Fn&& fn) {
  for (Unit* u : m.units()) fn(*u);
}

std::vector<std::pair<int, int>> whole_model(const StagePlan& plan, int n) {
  return plan.stages.empty() ? std::vector<std::pair<int, int>>{{0, n}} : plan.stages;
}

}  // namespace

void UnitList::number_parameters() {
  uint32_t first = 0;
  for (const auto& m : modules)
    for (Unit* u : m->units()) {
      u->set_first_index(first);
      first += u->index_span();
    }
}

int64_t UnitList::num_params() const {
  int64_t n = 0;
  for (const auto& m : modules) n += global_numel(*m);
  return n;
}

double UnitList::train_flops_per_sample() const {
  double f = 0.0;
  for (const auto& m : modules) f += m->train_flops_per_sample();
  return f;
}

std::vector<double> UnitList::unit_costs() const {
  std::vector<double> c;
  for (const auto& m : modules) c.push_back(m->train_flops_per_sample());
  return c;
}

bool UnitList::recomputes_selectively() const {
  for (const auto& m : modules)
    if (m->recomputes_selectively()) return true;
  return false;
}

std::vector<std::vector<int>> UnitList::reads() const {
  std::vector<std::vector<int>> r(modules.size());
  for (size_t i = 0; i < modules.size(); ++i)
    for (const Unit* other : modules[i]->unit().reads())
      for (size_t j = 0; j < modules.size(); ++j)
        if (&modules[j]->unit() == other) r[i].push_back(int(j));
  return r;
}

Model::Model(UnitList units, int64_t max_batch, ComputeDevice& device, ParamStorage storage, StagePlan stages)
    : Model(std::move(units), max_batch, device, storage, std::move(stages), false) {}

Model::Model(UnitList units, int64_t max_batch, ComputeDevice& device, ParamStorage storage, StagePlan stages,
             bool counting)
    : dev_(device), sample_(units.sample), plan_(std::move(stages)), max_batch_(max_batch),
      num_params_(units.num_params()), flops_per_sample_(units.train_flops_per_sample()),
      arena_(Arena::counting()) {
  units.number_parameters();
  modules_ = std::move(units.modules);
  const int n = int(modules_.size());
  DT_ASSERT(n >= 2 && plan_.slots >= 1);
  plan_.stages = whole_model(plan_, n);
  for (size_t k = 0; k < plan_.stages.size(); ++k) {
    const auto [first, last] = plan_.stages[k];
    DT_ASSERT(0 <= first && first < last && last <= n && (k == 0 || plan_.stages[k - 1].second <= first));
  }
  plan(arena_);  // counted first: the activations then take one block of exactly that size, no unused tail
  if (counting) return;
  arena_ = Arena(device, std::max<size_t>(arena_.bytes_used(), 64));
  plan(arena_);
  int64_t total = 0;
  for (Unit* u : units_) total += u->numel();
  if (storage == ParamStorage::owned) {
    params_ = Buffer(dev_, sizeof(float) * total);
    grads_ = Buffer(dev_, sizeof(float) * total);
    int64_t off = 0;
    for (Unit* u : units_) {
      u->bind(params_.f32() + off, grads_.f32() + off);
      off += u->numel();
    }
    if (plan_.bf16_weights) bind_bf16_weights();
  }
  dev_.zero(loss_sum_, 2 * sizeof(double));
  dev_.synchronize();  // constants the modules uploaded while planning
}

size_t Model::planned_bytes(UnitList& units, int64_t max_batch, const StagePlan& stages) {
  // The constructor's planning on a counting arena; the modules are handed back, to be planned again.
  Model m(std::move(units), max_batch, cpu_device(), ParamStorage::bound_by_caller, stages, true);
  units.modules = std::move(m.modules_);
  return m.activation_bytes();
}

void Model::plan(Arena& arena) {
  const int n = int(modules_.size());
  const StepContext largest = largest_pass(sample_, max_batch_, plan_.sequence_parts);
  auto holds = [&](int unit) {
    for (auto [first, last] : plan_.stages)
      if (first <= unit && unit < last) return true;
    return false;
  };
  has_input_unit_ = holds(0);
  has_loss_unit_ = holds(n - 1);
  units_.clear();
  recomputed_.assign(size_t(n), 0);
  std::vector<int> held;
  for (int i = 0; i < n; ++i) {
    if (!holds(i)) continue;
    held.push_back(i);
    for (Unit* u : modules_[size_t(i)]->units()) units_.push_back(u);
    recomputed_[size_t(i)] = plan_.recompute == Recompute::full && i > 0 && i < n - 1 &&
                             modules_[size_t(i)]->unit().reads().empty();
  }
  plan_units(arena, largest, held);
  const int S = plan_.slots;
  int64_t widest = 0;  // the widest hidden state a held unit reads or writes
  stages_.clear();
  for (auto [first, last] : plan_.stages) {
    Stage st;
    st.first = first;
    st.last = last;
    st.has_input_unit = first == 0;
    st.has_loss_unit = last == n;
    const int64_t in = first > 0 ? modules_[size_t(first - 1)]->output_floats(largest) : 0;
    const int64_t out = modules_[size_t(last - 1)]->output_floats(largest);
    for (int u = std::max(first - 1, 0); u < last; ++u) widest = std::max(widest, modules_[size_t(u)]->output_floats(largest));
    for (int slot = 0; slot < S; ++slot) {
      if (!st.has_input_unit) st.in.push_back(arena.f32(in));
      // the lowest unit's input gradient: the input unit's stage keeps it only for a split backward's W
      if (!st.has_input_unit || plan_.split_backward)
        st.gin.push_back(arena.f32(st.has_input_unit ? modules_[0]->output_floats(largest) : in));
      if (!st.has_loss_unit) st.gout.push_back(arena.f32(out));
    }
    stages_.push_back(std::move(st));
  }
  const int64_t R = largest.rows();
  inputs_.clear();
  fed_.clear();
  if (has_input_unit_)
    for (int slot = 0; slot < S; ++slot) {
      inputs_.push_back(arena.alloc(max_batch_ * sample_.inputs, DType::f32));  // int32 or float: 4 bytes each
      fed_.push_back(nullptr);
    }
  if (has_loss_unit_) {
    targets_ = static_cast<int32_t*>(arena.alloc(max_batch_ * sample_.targets, DType::i32));
    per_row_ = arena.f32(R);
  }
  int64_t scratch = 0;
  for (Unit* u : units_)
    for (const auto& m : modules_)
      if (&m->unit() == u) scratch = std::max(scratch, m->scratch_floats(largest));
  scratch_ = arena.f32(scratch);
  grad_a_ = arena.f32(widest);
  grad_b_ = arena.f32(widest);
  loss_sum_ = static_cast<double*>(arena.alloc(4, DType::f32));  // the loss sum and the metric's
  metric_sum_ = loss_sum_ ? loss_sum_ + 1 : nullptr;
}

void Model::plan_units(Arena& arena, const StepContext& largest, const std::vector<int>& held) {
  const int n = int(modules_.size()), S = plan_.slots;
  const KeepPlan keep{S, plan_.recompute == Recompute::selective, plan_.bf16_activations},
      once{1, false, plan_.bf16_activations};
  // The region the units recomputed in full share: one unit is recomputed (or run forward) at a time.
  size_t shared = 0;
  for (int i : held)
    if (recomputed_[size_t(i)]) {
      Arena count = Arena::counting();
      modules_[size_t(i)]->plan(count, largest, once);
      shared = std::max(shared, count.bytes_used());
    }
  float* region = shared ? arena.f32(int64_t(shared / sizeof(float))) : nullptr;
  kept_out_.assign(size_t(n), {});
  stores_.assign(size_t(n), {});
  for (int i : held) {
    Module& m = *modules_[size_t(i)];
    const bool again = recomputed_[size_t(i)] != 0;
    if (again) {
      Arena over = Arena::over(region, shared);
      m.plan(over, largest, once);
      m.unit().set_backward_reads_params(true);  // its backward runs its forward (FSDP gathers for it)
      for (int slot = 0; slot < S; ++slot) kept_out_[size_t(i)].push_back(arena.f32(m.output_floats(largest)));
    } else {
      m.plan(arena, largest, keep);
    }
    const int64_t w = plan_.split_backward ? m.weight_grad_floats(largest, again) : 0;
    if (w > 0)
      for (int slot = 0; slot < S; ++slot) stores_[size_t(i)].emplace_back(dev_, arena.f32(w), w, again);
  }
}

ExpertLoad Model::take_expert_load() {
  ExpertLoad load;
  for (auto& m : modules_) m->take_expert_load(load);
  return load;
}

bool Model::holds_whole_model() const {
  return stages_.size() == 1 && stages_[0].has_input_unit && stages_[0].has_loss_unit;
}

void Model::zero_grad() {
  DT_ASSERT(owns_params());
  dev_.zero(grads_.data(), grads_.size());
}

int64_t Model::offset_of(const Unit& u) const {
  int64_t off = 0;
  for (const Unit* v : units_) {
    if (v == &u) return off;
    off += v->numel();
  }
  DT_ASSERT(false);
  return -1;
}

float* Model::host_params() {
  DT_ASSERT(owns_params());
  if (dev_.host_accessible()) return params_.f32();
  if (!host_params_.data()) host_params_ = Buffer(host_memory(), params_.size());
  dev_.download(host_params_.data(), params_.data(), params_.size());
  return host_params_.f32();
}

void Model::upload_host_params() {
  if (!dev_.host_accessible()) dev_.upload(params_.data(), host_params_.data(), params_.size());
  refresh_bf16_weights();
  dev_.synchronize();
}

void Model::bind_bf16_weights() {
  int64_t total = 0;
  for (const Unit* u : units_) total += u->read_by_products() ? u->numel() : 0;
  if (total == 0) return;
  params_bf16_ = Buffer(dev_, sizeof(uint16_t) * size_t(total));
  uint16_t* at = static_cast<uint16_t*>(params_bf16_.data());
  for (Unit* u : units_)
    if (u->read_by_products()) {
      u->bind_bf16(at);
      at += u->numel();
    }
}

void Model::refresh_bf16_weights() {
  for (const Unit* u : units_)
    if (u->param_bf16()) dev_.to_bf16(u->param_data(), u->param_bf16(), u->numel());
}

void Model::init_weights(uint64_t seed) {
  float* host = host_params();
  // fill the host array through the units, then point them back at the device buffers
  for (Unit* u : units_) u->bind(host + offset_of(*u), u->grad_data());
  init_parameters(units_, seed);
  for (Unit* u : units_) u->bind(params_.f32() + offset_of(*u), u->grad_data());
  upload_host_params();
}

const void* Model::to_device(const void* host, void* device_copy, size_t bytes) {
  if (dev_.host_accessible()) return host;
  dev_.upload(device_copy, host, bytes);
  return device_copy;
}

UnitPass Model::pass(int k, int slot, const BatchView* batch, const StepContext& ctx) {
  const Stage& st = stages_[size_t(k)];
  UnitPass p{ctx};
  p.slot = slot;
  p.loss_sum = loss_sum_;
  p.scratch = scratch_;
  DT_ASSERT(!batch || (batch->shape.input == sample_.input && batch->samples >= ctx.B));
  // Only the stage holding the input unit copies (and keeps, per slot, for its backward) the inputs;
  // only the loss unit's copies the targets. A rank's other stage (a V schedule's) leaves them be.
  if (st.has_input_unit) {
    if (batch)
      fed_[size_t(slot)] = to_device(batch->inputs, inputs_[size_t(slot)], size_t(ctx.B) * batch->shape.input_bytes());
    p.inputs = fed_[size_t(slot)];
  }
  if (batch && batch->targets && st.has_loss_unit)
    p.targets = static_cast<const int32_t*>(
        to_device(batch->targets, targets_, sizeof(int32_t) * size_t(ctx.B * batch->shape.targets)));
  return p;
}

const float* Model::stage_output(int k, int slot) const {
  const Stage& st = stages_[k];
  return st.has_loss_unit ? nullptr : output_of(st.last - 1, slot);
}

const float* Model::output_of(int u, int slot) const {
  return recomputed_[size_t(u)] ? kept_out_[size_t(u)][size_t(slot)] : modules_[size_t(u)]->output(slot);
}

UnitPass Model::unit_pass(const UnitPass& p, int u) {
  UnitPass q = p;
  if (recomputed_[size_t(u)]) q.slot = 0;
  std::vector<WeightGradStore>& w = stores_[size_t(u)];
  q.weight_grads = w.empty() ? nullptr : &w[size_t(p.slot)];
  return q;
}

int64_t Model::stage_input_floats(int k, const StepContext& ctx) const {
  const Stage& st = stages_[k];
  return st.has_input_unit ? 0 : modules_[size_t(st.first - 1)]->output_floats(ctx);
}

int64_t Model::stage_output_floats(int k, const StepContext& ctx) const {
  return modules_[size_t(stages_[k].last - 1)]->output_floats(ctx);
}

const float* Model::unit_input(int k, int u, int slot) const {
  const Stage& st = stages_[k];
  if (u > st.first) return output_of(u - 1, slot);
  return st.has_input_unit ? nullptr : st.in[size_t(slot)];
}

void Model::forward_units(int k, int stop, const UnitPass& p, UnitHooks* hooks) {
  DT_ASSERT(p.ctx.B <= max_batch_ && p.ctx.T <= sample_.targets);
  for (int u = stages_[k].first; u < stop; ++u) {
    Module& m = *modules_[size_t(u)];
    if (hooks) each_unit(m, [&](Unit& x) { hooks->pre_forward(x); });
    {
      TraceScope traced("compute", m.unit().name(), " F", unit_clock(u, 0, p.backward));
      m.forward(unit_input(k, u, p.slot), unit_pass(p, u));
      if (recomputed_[size_t(u)])  // its activations are overwritten by the next unit recomputed: its output is kept
        dev_.copy(kept_out_[size_t(u)][size_t(p.slot)], m.output(0), sizeof(float) * size_t(m.output_floats(p.ctx)));
    }
    if (hooks) each_unit(m, [&](Unit& x) { hooks->post_forward(x); });
  }
}

void Model::stage_forward(int k, int slot, const BatchView& batch, const StepContext& ctx, bool backward,
                          UnitHooks* hooks, float* per_row) {
  UnitPass p = pass(k, slot, &batch, ctx);
  p.backward = backward;
  p.per_row = backward ? nullptr : per_row;
  p.metric_sum = backward ? nullptr : metric_sum_;
  p.per_row_device = dev_.host_accessible() ? nullptr : per_row_;
  PhaseScope phase(Phase::forward);
  forward_units(k, stages_[k].last, p, hooks);
}

void Model::stage_backward(int k, int slot, const StepContext& ctx, BackwardPart part, UnitHooks* hooks) {
  const Stage& st = stages_[k];
  const UnitPass p = pass(k, slot, nullptr, ctx);
  const bool input = part != BackwardPart::weight, complete = part != BackwardPart::input;
  PhaseScope phase(Phase::backward);
  const char* what = part == BackwardPart::all ? " B" : input ? " I" : " W";
  if (!input) {  // the weight gradients the input half kept, units in backward order
    for (int u = st.last; u-- > st.first;) {
      Module& m = *modules_[size_t(u)];
      // the input unit's output gradient: given (the unit alone in its stage), or kept by the input half
      float* dy = u != 0 ? nullptr : st.last == 1 && !st.has_loss_unit ? st.gout[size_t(slot)] : st.gin[size_t(slot)];
      {
        TraceScope traced("compute", m.unit().name(), what, unit_clock(u, 1, true));
        m.backward(nullptr, dy, nullptr, unit_pass(p, u), part);
      }
      if (hooks) each_unit(m, [&](Unit& x) { hooks->post_backward(x); });
    }
    return;
  }
  // each unit writes its input's gradient into a buffer other than its output's: the lowest one
  // (above the input unit) into the stage's (the input unit's stage: there only when W needs it later)
  const bool lowest_to_stage = !st.gin.empty();
  const int lowest = st.has_input_unit ? 1 : st.first;
  float* g = st.has_loss_unit ? nullptr : st.gout[size_t(slot)];
  for (int u = st.last; u-- > st.first;) {
    Module& m = *modules_[size_t(u)];
    if (hooks) each_unit(m, [&](Unit& x) { hooks->pre_backward(x); });
    const UnitPass q = unit_pass(p, u);
    if (recomputed_[size_t(u)]) {  // its forward again, into the shared region (no hooks: its parameters are gathered)
      UnitPass again = q;
      again.backward = true;
      TraceScope traced("compute", m.unit().name(), " R", unit_clock(u, 1, true));
      m.forward(unit_input(k, u, slot), again);
    }
    if (u == 0) {  // the input unit: its parameters' gradients only
      TraceScope traced("compute", m.unit().name(), what, unit_clock(u, 1, true));
      if (complete) m.backward(nullptr, g, nullptr, q, part);
    } else {
      float* dx = u == lowest && lowest_to_stage ? st.gin[size_t(slot)] : g == grad_a_ ? grad_b_ : grad_a_;
      TraceScope traced("compute", m.unit().name(), what, unit_clock(u, 1, true));
      m.backward(unit_input(k, u, slot), g, dx, q, part);
      g = dx;
    }
    if (complete && hooks) each_unit(m, [&](Unit& x) { hooks->post_backward(x); });
  }
}

double Model::forward_backward(const BatchView& batch, const StepContext& ctx, UnitHooks* hooks) {
  queue_forward_backward(batch, ctx, hooks);
  return take_loss();
}

double Model::take_loss() {
  double loss = 0.0;
  dev_.download(&loss, loss_sum_, sizeof loss);
  dev_.zero(loss_sum_, sizeof(double));
  return loss;
}

void Model::queue_forward_backward(const BatchView& batch, const StepContext& ctx, UnitHooks* hooks) {
  DT_ASSERT(holds_whole_model());
  if (hooks) hooks->begin_pass(true);
  stage_forward(0, 0, batch, ctx, true, hooks);
  stage_backward(0, 0, ctx, BackwardPart::all, hooks);
  if (hooks) hooks->end_pass();
}

double Model::forward_loss(const BatchView& batch, const StepContext& ctx, float* per_row, UnitHooks* hooks) {
  DT_ASSERT(holds_whole_model());
  StepContext eval = ctx;
  eval.training = false;
  if (hooks) hooks->begin_pass(false);
  stage_forward(0, 0, batch, eval, false, hooks, per_row);
  if (hooks) hooks->end_pass();
  return take_loss();
}

EvalSums Model::forward_eval(const BatchView& batch, const StepContext& ctx, UnitHooks* hooks) {
  EvalSums s;
  s.loss = forward_loss(batch, ctx, nullptr, hooks);
  s.metric = take_metric();
  return s;
}

double Model::take_metric() {
  double m = 0.0;
  dev_.download(&m, metric_sum_, sizeof m);
  dev_.zero(metric_sum_, sizeof(double));
  return m;
}

void Model::predict(const BatchView& batch, const StepContext& ctx, float* out, UnitHooks* hooks) {
  DT_ASSERT(holds_whole_model());
  StepContext eval = ctx;
  eval.training = false;
  const UnitPass p = pass(0, 0, &batch, eval);
  const int last = int(modules_.size()) - 1;
  if (hooks) hooks->begin_pass(false);
  forward_units(0, last, p, hooks);
  Module& m = *modules_[size_t(last)];
  if (hooks) hooks->pre_forward(m.unit());
  m.predict(unit_input(0, last, 0), p, out);
  if (hooks) hooks->post_forward(m.unit());
  if (hooks) hooks->end_pass();
}

}  // namespace dtrain
