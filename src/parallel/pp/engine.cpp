// PipelineEngine (see engine.hpp): slots, transfers and the action loop.
#include "parallel/pp/engine.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/trace.hpp"
#include "parallel/pp/schedule_detail.hpp"

namespace dtrain {

namespace {
bool is_receive(Op op) { return op == Op::RECV_F || op == Op::RECV_B; }
bool is_send(Op op) { return op == Op::SEND_F || op == Op::SEND_B; }
}  // namespace

Schedule forward_then_backward(const Schedule& like, int n) {
  Schedule s;
  s.name = like.name + " (forward-then-backward, " + std::to_string(n) + " micro-batches)";
  s.pp = like.pp;
  s.virtual_stages = like.virtual_stages;
  s.microbatches = n;
  s.stage_rank = like.stage_rank;
  s.ranks.assign(size_t(like.pp), {});
  for (int m = 0; m < n; ++m)
    for (int st = 0; st < s.stages(); ++st) s.ranks[size_t(s.stage_rank[size_t(st)])].push_back({Op::F, st, m});
  for (int m = 0; m < n; ++m)
    for (int st = s.stages(); st-- > 0;) s.ranks[size_t(s.stage_rank[size_t(st)])].push_back({Op::B, st, m});
  pp_detail::insert_communication(s);
  return s;
}

PipelineEngine::PipelineEngine(Model& model, std::vector<Schedule> lists, ProcessGroup& pp,
                               std::function<void(bool)> set_sync)
    : model_(model), lists_(std::move(lists)), pp_(pp), set_sync_(std::move(set_sync)), rank_(pp.rank()) {
  DT_ASSERT(!lists_.empty());
  const Schedule& s = lists_.back();
  DT_ASSERT(s.pp == pp.size());
  last_stage_rank_ = s.stage_rank.back();
  local_.assign(size_t(s.stages()), -1);
  const std::vector<int> mine = s.stages_of(rank_);
  DT_ASSERT(int(mine.size()) == model.num_stages());
  for (size_t k = 0; k < mine.size(); ++k) local_[size_t(mine[k])] = int(k);
  stats_.action_seconds.assign(size_t(s.stages()), {});
  stats_.action_count.assign(size_t(s.stages()), {});
  for (const Schedule& l : lists_) slots_.push_back(std::max(1, l.slots()[size_t(rank_)]));
  slot_.assign(size_t(s.stages()), std::vector<int>(size_t(s.microbatches), -1));
  free_.assign(size_t(s.stages()), {});
}

int PipelineEngine::slot_of(int stage, int micro) {
  int& slot = slot_[size_t(stage)][size_t(micro)];
  if (slot >= 0) return slot;
  std::vector<int>& f = free_[size_t(stage)];
  require(!f.empty(), "internal: pipeline stage " + std::to_string(stage) +
                          " needs more activation slots than its model was planned with");
  slot = f.front();
  f.erase(f.begin());
  return slot;
}

// The slot stays recorded for the pass: a send after the backward still reads its buffer (which
// nothing overwrites before that send is waited for).
void PipelineEngine::free_slot(int stage, int micro) {
  const int slot = slot_[size_t(stage)][size_t(micro)];
  DT_ASSERT(slot >= 0);
  free_[size_t(stage)].push_back(slot);
}

uint32_t PipelineEngine::tag(const Action& a) const {
  // the boundary between stages b and b + 1, and the direction
  const int b = a.op == Op::SEND_F || a.op == Op::RECV_B ? a.stage : a.stage - 1;
  const bool grad = a.op == Op::SEND_B || a.op == Op::RECV_B;
  return uint32_t((a.micro * lists_.back().stages() + b) * 2 + (grad ? 1 : 0));
}

int PipelineEngine::peer(const Action& a) const {
  const bool down = a.op == Op::SEND_F || a.op == Op::RECV_B;  // with the next stage
  return lists_.back().stage_rank[size_t(a.stage + (down ? 1 : -1))];
}

float* PipelineEngine::buffer(const Action& a, int slot) const {
  const int k = local(a.stage);
  switch (a.op) {
    case Op::SEND_F: return const_cast<float*>(model_.stage_output(k, slot));
    case Op::RECV_F: return model_.stage_input(k, slot);
    case Op::SEND_B: return const_cast<float*>(model_.stage_input_grad(k, slot));
    case Op::RECV_B: return model_.stage_output_grad(k, slot);
    default: DT_ASSERT(false); return nullptr;
  }
}

int64_t PipelineEngine::transfer_bytes(const Action& a, const StepContext& ctx) const {
  const int k = local(a.stage);
  const bool output = a.op == Op::SEND_F || a.op == Op::RECV_B;  // the stage's output or its gradient
  return (output ? model_.stage_output_floats(k, ctx) : model_.stage_input_floats(k, ctx)) * int64_t(sizeof(float));
}

bool PipelineEngine::post_receive(size_t i, const Action& a, const StepContext& ctx) {
  if (receives_[i]) return true;
  const bool forward = a.op == Op::RECV_F;
  if (forward && slot_[size_t(a.stage)][size_t(a.micro)] < 0 && free_[size_t(a.stage)].empty()) return false;
  if (!forward && slot_[size_t(a.stage)][size_t(a.micro)] < 0) return false;  // not forwarded yet
  receives_[i] = pp_.recv_async(buffer(a, slot_of(a.stage, a.micro)), size_t(transfer_bytes(a, ctx)), peer(a), tag(a));
  return true;
}

void PipelineEngine::wait_receive(size_t i, const Action& a, const StepContext& ctx) {
  require(post_receive(i, a, ctx), "internal: pipeline receive " + to_string(a) + " has no free slot");
  try {
    receives_[i]->wait();
  } catch (const std::exception& e) {
    const int from = peer(a);
    throw Error("pipeline stage " + std::to_string(a.stage) + " (pp rank " + std::to_string(rank_) + ") got no " +
                (a.op == Op::RECV_F ? "activations" : "gradient") + " of micro-batch " + std::to_string(a.micro) +
                " from stage " + std::to_string(a.op == Op::RECV_F ? a.stage - 1 : a.stage + 1) + " on pp rank " +
                std::to_string(from) + " (global rank " + std::to_string(pp_.ranks()[size_t(from)]) + "): " + e.what());
  }
  receives_[i].reset();
}

void PipelineEngine::wait_sends_from(const float* buffer) {
  for (Pending& p : sends_)
    if (p.work && p.buffer == buffer) {
      p.work->wait();
      p.work.reset();
    }
}

// A pass starts with every slot free, nothing posted, and each stage's gradient-completing action found.
void PipelineEngine::begin_pass(const Schedule& s) {
  const std::vector<Action>& list = s.ranks[size_t(rank_)];
  for (auto& v : slot_) std::fill(v.begin(), v.end(), -1);
  const int slots = &s == eval_list_.get() ? 1 : slots_[size_t(&s - lists_.data())];
  for (size_t st = 0; st < free_.size(); ++st) {
    free_[st].clear();
    if (local(int(st)) >= 0)
      for (int k = 0; k < slots; ++k) free_[st].push_back(k);
  }
  receives_.assign(list.size(), nullptr);
  sends_.clear();
  final_of_.assign(size_t(s.stages()), list.size());
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].op == Op::B || list[i].op == Op::W) final_of_[size_t(list[i].stage)] = i;
}

// Receives for the actions up to the next compute after `from`, posted where their slot is free.
void PipelineEngine::post_ahead(const std::vector<Action>& list, size_t from, const std::vector<MicroBatch>& mb) {
  for (size_t j = from; j < list.size(); ++j) {
    if (is_receive(list[j].op)) {
      if (!post_receive(j, list[j], mb[size_t(list[j].micro)].ctx)) return;
    } else if (!is_send(list[j].op)) {
      return;
    }
  }
}

void PipelineEngine::post_send(const Action& a, const StepContext& ctx) {
  float* buf = buffer(a, slot_of(a.stage, a.micro));
  const int64_t bytes = transfer_bytes(a, ctx);
  sends_.push_back({buf, pp_.send_async(buf, size_t(bytes), peer(a), tag(a))});
  stats_.bytes_sent += bytes;
}

void PipelineEngine::run_forward(const Schedule& s, const Action& a, int slot, const MicroBatch& b, bool backward,
                                 UnitHooks* hooks) {
  const int k = local(a.stage);
  wait_sends_from(model_.stage_output(k, slot));
  model_.stage_forward(k, slot, b.batch, b.ctx, backward, hooks);
  const int next = a.stage + 1;
  if (next < s.stages() && local(next) >= 0)  // the next stage is here too: hand over in memory
    model_.device().copy(model_.stage_input(local(next), slot_of(next, a.micro)), model_.stage_output(k, slot),
                         sizeof(float) * size_t(model_.stage_output_floats(k, b.ctx)));
}

// B, I or W; completes_step: the step's last pass, and this action completes its stage's gradients.
void PipelineEngine::run_backward(const Action& a, int slot, const MicroBatch& b, bool completes_step,
                                  UnitHooks* hooks) {
  const int k = local(a.stage);
  if (a.op != Op::I) set_sync_(completes_step);
  if (a.op != Op::W) wait_sends_from(model_.stage_input_grad(k, slot));
  model_.stage_backward(k, slot, b.ctx,
                        a.op == Op::B   ? BackwardPart::all
                        : a.op == Op::I ? BackwardPart::input
                                        : BackwardPart::weight,
                        hooks);
  const int prev = a.stage - 1;
  if (a.op != Op::W && prev >= 0 && local(prev) >= 0)
    model_.device().copy(model_.stage_output_grad(local(prev), slot_of(prev, a.micro)),
                         model_.stage_input_grad(k, slot), sizeof(float) * size_t(model_.stage_input_floats(k, b.ctx)));
  if (a.op != Op::I) free_slot(a.stage, a.micro);
}

// A compute action that ran from t to end: its stage's costs (training passes only) and the trace.
void PipelineEngine::record_compute(const Action& a, double t, double end, bool backward) {
  if (backward) {
    const size_t op = size_t(a.op);  // F, B, I, W are 0..3
    stats_.action_seconds[size_t(a.stage)][op] += end - t;
    stats_.action_count[size_t(a.stage)][op] += 1;
  }
  if (Trace::on())
    Trace::record({t, end, "compute", to_string(a),
                   "{\"stage\": " + std::to_string(a.stage) + ", \"micro\": " + std::to_string(a.micro) + "}"});
}

void PipelineEngine::run(const Schedule& s, const std::vector<MicroBatch>& mb, UnitHooks* hooks, bool backward,
                         bool last_of_step) {
  const std::vector<Action>& list = s.ranks[size_t(rank_)];
  begin_pass(s);
  if (hooks) hooks->begin_pass(backward);
  const double start = monotonic_seconds();
  double busy = 0.0;
  for (size_t i = 0; i < list.size(); ++i) {
    const Action& a = list[i];
    const MicroBatch& b = mb[size_t(a.micro)];
    if (is_receive(a.op)) {
      wait_receive(i, a, b.ctx);
      continue;
    }
    if (is_send(a.op)) {
      post_send(a, b.ctx);
      continue;
    }
    post_ahead(list, i + 1, mb);
    const int slot = slot_of(a.stage, a.micro);
    const double t = monotonic_seconds();
    if (a.op == Op::F)
      run_forward(s, a, slot, b, backward, hooks);
    else
      run_backward(a, slot, b, last_of_step && final_of_[size_t(a.stage)] == i, hooks);
    const double end = monotonic_seconds();
    busy += end - t;
    record_compute(a, t, end, backward);
  }
  for (Pending& p : sends_)
    if (p.work) p.work->wait();
  sends_.clear();
  if (hooks) hooks->end_pass();
  if (backward) {
    stats_.passes++;
    stats_.pass_seconds += monotonic_seconds() - start;
    stats_.busy_seconds += busy;
  }
}

void PipelineEngine::train(const std::vector<MicroBatch>& mb, UnitHooks* hooks, bool last_of_step) {
  const auto list = std::find_if(lists_.begin(), lists_.end(),
                                 [&](const Schedule& l) { return l.microbatches == int(mb.size()); });
  DT_ASSERT(list != lists_.end());  // the plan made a list for every batch size the trainer runs
  run(*list, mb, hooks, true, last_of_step);
}

EvalSums PipelineEngine::forward_eval(const MicroBatch& b, UnitHooks* hooks) {
  if (!eval_list_) {  // one batch through every stage, forward only
    eval_list_ = std::make_unique<Schedule>(forward_then_backward(lists_.back(), 1));
    for (auto& list : eval_list_->ranks)
      list.erase(std::remove_if(list.begin(), list.end(),
                                [](const Action& a) {
                                  return a.op == Op::B || a.op == Op::SEND_B || a.op == Op::RECV_B;
                                }),
                 list.end());
  }
  eval_batch_.assign(1, b);
  run(*eval_list_, eval_batch_, hooks, false, false);
  double v[2] = {0.0, 0.0};
  if (rank_ == last_stage_rank_) {
    v[0] = model_.take_loss();
    v[1] = model_.take_metric();
  }
  pp_.broadcast(v, 2, ElemType::f64, last_stage_rank_);
  return {v[0], v[1]};
}

double PipelineEngine::take_loss() {
  double v = rank_ == last_stage_rank_ ? model_.take_loss() : 0.0;
  pp_.broadcast(&v, 1, ElemType::f64, last_stage_rank_);
  return v;
}

}  // namespace dtrain
