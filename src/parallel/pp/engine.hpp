// The pipeline engine (DESIGN §3.8): runs this rank's action list of any schedule on its stages of
// the model. Activations and their gradients move point-to-point over the mesh's pp group, sends
// in the background while the rank computes, each receive posted ahead as soon as its buffer is
// free; between two stages of the same rank they are handed over in memory. Every micro-batch
// keeps its activations in a slot of its stage, taken at its forward and freed after its backward.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "comm/process_group.hpp"
#include "nn/model.hpp"
#include "parallel/pp/schedule.hpp"

namespace dtrain {

struct MicroBatch {
  BatchView batch;  // host memory, ctx.B samples, unchanged until the pass ends
  StepContext ctx;
};

struct PipelineStats {
  int64_t passes = 0;         // training passes run
  double pass_seconds = 0.0;  // their wall time, from the first action to the last send done
  double busy_seconds = 0.0;  // of it, computing (F, B, I, W)
  int64_t bytes_sent = 0;     // activations and gradients sent
  // By global stage (this rank's only) and compute action (F, B, I, W): their summed durations
  // and how many ran, for the simulator's measured costs.
  std::vector<std::array<double, 4>> action_seconds, action_count;
  double idle_share() const { return pass_seconds > 0 ? 1.0 - busy_seconds / pass_seconds : 0.0; }
};

class PipelineEngine {
 public:
  // `lists`: the schedules for the micro-batch counts a pass may have, fewest first, the full one
  // last, each validated already (pipeline_schedules); the model must have been built with this rank's stages
  // and at least its slots().
  // set_sync(on): whether the data-parallel strategy reduces the gradients the next backward
  // completes (on only for each stage's last one of an optimizer step).
  PipelineEngine(Model& model, std::vector<Schedule> lists, ProcessGroup& pp,
                 std::function<void(bool)> set_sync);

  const Schedule& schedule() const { return lists_.back(); }
  // Training: the schedule over micro-batches mb; gradients accumulate into the units' buffers.
  // last_of_step: the optimizer step's last pass, whose final backwards complete the gradients.
  void train(const std::vector<MicroBatch>& mb, UnitHooks* hooks, bool last_of_step);
  // Evaluation: one batch forward through all stages; its loss sum and metric count, on every rank.
  EvalSums forward_eval(const MicroBatch& b, UnitHooks* hooks);
  // The training loss summed since the last call: the last stage's, on every rank (collective).
  double take_loss();

  // Each compute action's start and duration (seconds since the engine began), when recording.
  const PipelineStats& stats() const { return stats_; }

 private:
  struct Pending {
    const float* buffer;
    WorkPtr work;
  };
  int local(int stage) const { return local_[size_t(stage)]; }
  int slot_of(int stage, int micro);                    // taking a free slot on first use
  void free_slot(int stage, int micro);
  uint32_t tag(const Action& a) const;                  // the same on both ends of a transfer
  int peer(const Action& a) const;                      // pp rank at the other end
  float* buffer(const Action& a, int slot) const;       // what a send reads or a receive fills
  int64_t transfer_bytes(const Action& a, const StepContext& ctx) const;  // what a send or receive moves
  bool post_receive(size_t i, const Action& a, const StepContext& ctx);  // false: its slot is not free yet
  void wait_receive(size_t i, const Action& a, const StepContext& ctx);
  void wait_sends_from(const float* buffer);
  void run(const Schedule& s, const std::vector<MicroBatch>& mb, UnitHooks* hooks, bool backward, bool last_of_step);
  // The steps of run(): the pass's bookkeeping, posting, and one compute action each.
  void begin_pass(const Schedule& s);
  void post_ahead(const std::vector<Action>& list, size_t from, const std::vector<MicroBatch>& mb);
  void post_send(const Action& a, const StepContext& ctx);
  void run_forward(const Schedule& s, const Action& a, int slot, const MicroBatch& b, bool backward, UnitHooks* hooks);
  void run_backward(const Action& a, int slot, const MicroBatch& b, bool completes_step, UnitHooks* hooks);
  void record_compute(const Action& a, double t, double end, bool backward);

  Model& model_;
  std::vector<Schedule> lists_;  // by micro-batch count, fewest first
  std::vector<int> slots_;       // [i]: this rank's activation slots per stage under lists_[i]
  std::unique_ptr<Schedule> eval_list_;  // forward only, one micro-batch (made at the first evaluation)
  std::vector<MicroBatch> eval_batch_;
  ProcessGroup& pp_;
  std::function<void(bool)> set_sync_;
  int rank_;
  int last_stage_rank_;
  std::vector<int> local_;  // stage → the model's stage index here (-1: another rank's)
  std::vector<std::vector<int>> slot_;    // [stage][micro] → slot, -1 none
  std::vector<std::vector<int>> free_;    // [stage] → free slots
  std::vector<WorkPtr> receives_;         // [action index] posted ahead
  std::vector<Pending> sends_;
  std::vector<size_t> final_of_;          // [stage] → the action completing its gradients in this pass
  PipelineStats stats_;
};

// A pass of n micro-batches in GPipe's order on any stage placement (every forward, then every
// backward, micro-batch by micro-batch): what a pass runs when its schedule cannot be made for n
// (an epoch's short last batch).
Schedule forward_then_backward(const Schedule& like, int n);

}  // namespace dtrain
