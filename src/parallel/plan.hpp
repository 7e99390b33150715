// The one place a parallel plan is applied (DESIGN §3), in a fixed order: the model is built as this
// rank's tensor-parallel slice of this rank's pipeline stages, its attention over this rank's share
// of every sequence under context parallel, its share of the experts under expert parallel, then
// sharded by FSDP over dp_shard × cp (each rank's slice; experts over the ranks holding the same
// ones) or replicated with DDP over the data-parallel and context-parallel ranks, and the optimizer
// steps what this rank owns. What a training step needs of the result lives here too: the passes (one
// pass of the model, or a pipeline schedule over micro-batches), zeroing and finishing gradients,
// the global gradient norm; and, after the run, what each strategy moved.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/mesh.hpp"
#include "core/json.hpp"
#include "optim/optimizer.hpp"
#include "parallel/cp/context_parallel.hpp"
#include "parallel/ddp/ddp.hpp"
#include "parallel/ep/expert_parallel.hpp"
#include "parallel/fsdp/fsdp.hpp"
#include "parallel/pp/engine.hpp"
#include "parallel/tp/grads.hpp"
#include "parallel/tp/regions.hpp"

namespace dtrain {

// Pipeline parallel (pp > 1): the schedule and how the model is cut.
struct PipelineOptions {
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved-1f1b | zb-h1 | zb-v
  std::string schedule_file;      // a list of actions to run instead (`dtrain plan --save`)
  int virtual_stages = 1;         // stages per rank
  int microbatches = 0;           // per pass; 0: pp
  std::vector<int> split;         // first unit of each stage but the first; empty: balanced by cost
  std::vector<double> unit_costs; // each unit's cost for the balance; empty: its training FLOPs
  // Rows of the batches a training pass will see (the per-rank batch, an epoch's short last one):
  // a batch of fewer rows than micro-batches runs the schedule for its own count, made up front for
  // these counts only (empty: the full count only).
  std::vector<int64_t> batch_rows;
};

// How the strategies are set up; which of them apply comes from the mesh's shape.
struct ParallelPlan {
  PipelineOptions pp;
  bool tp_overlap = true;              // tensor parallel: collectives beside the matmuls
  int tp_overlap_chunks = 1;           // tensor parallel: row chunks of a row-parallel matmul
  Recompute recompute = Recompute::none;  // what the model keeps of its activations (train.recompute)
  bool bf16_activations = false;          // and in which type (StagePlan::bf16_activations)
  bool bf16_weights = false;              // products read the weights' bf16 copy (StagePlan::bf16_weights)
  bool tp_sequence = false;            // tensor parallel: rows of norms, dropout, residuals split too
  FsdpOptions fsdp;                    // dp_shard > 1
  size_t ddp_bucket_bytes = 0;         // dp > 1 without sharding; 0: DataParallel's automatic size
  CpMode cp_mode = CpMode::ring;       // cp > 1: ring or all-to-all attention
  // false: every part is built and nothing is written into it, not even the initial weights (the
  // planner builds a rank's parts on a device that only counts what they take)
  bool draw_weights = true;
};

// This rank's tensor-parallel slice of the model on `mesh`.
TpSlice tp_slice_of(const DeviceMesh& mesh, const ParallelPlan& plan);

// The pipeline's schedules, fewest micro-batches first: the full pass (the named schedule, or the
// file's) last, and before it one for each shorter count o.batch_rows asks for (the named schedule
// for that count, or forward-then-backward where it cannot be made), each validated: Error naming
// the first problem otherwise.
std::vector<Schedule> pipeline_schedules(const PipelineOptions& o, int pp);
// The most rows a micro-batch of a batch of up to `batch` rows gets (a pass deals its rows into at
// most `microbatches` micro-batches as evenly as they go).
int64_t micro_batch_rows(int64_t batch, int microbatches);
// The stages of the model of `units` that pp rank `rank` runs under those schedules. Error, the same
// on every rank, for a cut the model cannot take (checked for the whole pipeline).
StagePlan pipeline_stage_plan(const UnitList& units, const PipelineOptions& o, const std::vector<Schedule>& lists,
                              int rank);

// A model's units for tensor-parallel slice `slice` (its kind's units(), for the config at hand), with
// context parallel's attention and expert parallel's exchange (each null without).
using UnitFactory =
    std::function<UnitList(TpSlice slice, TpRegions& regions, SequenceAttention* sequence, ExpertExchange* experts)>;

// The activations and buffers this rank's part of the model plans do not fit in the memory given.
struct ActivationsDoNotFit : Error {
  ActivationsDoNotFit(size_t need, size_t have)
      : Error("the model's activations need " + std::to_string(need) + " bytes, " + std::to_string(have) +
              " are available"),
        need(need), have(have) {}
  size_t need, have;
};

class ParallelModel {
 public:
  // Collective over the mesh. The model (its units from `units`) is planned for batches of up to
  // max_batch samples, on `device`, with the one-process initial weights of `seed` (sliced and
  // sharded as this rank holds them). Errors of the layout (the schedules, the cut, what the slices
  // divide) are ConfigErrors, found alike on every rank, before any memory is taken; then
  // ActivationsDoNotFit when this rank's activations would take more than activation_limit bytes;
  // std::bad_alloc when memory cannot be had.
  ParallelModel(const UnitFactory& units, int64_t max_batch, ComputeDevice& device, DeviceMesh& mesh,
                const ParallelPlan& plan, const OptimizerConfig& optimizer, uint64_t seed,
                size_t activation_limit = SIZE_MAX);

  Model& model() { return *model_; }
  const TpSlice& tp_slice() const { return slice_; }
  Optimizer& optimizer() { return *opt_; }
  FullyShardedDataParallel* fsdp() { return fsdp_.get(); }        // dp_shard > 1
  DataParallel* ddp() { return ddp_.get(); }                      // replicated data parallel
  TensorParallelRegions* tp_regions() { return regions_.get(); }  // tp > 1
  PipelineEngine* pipeline() { return pipeline_.get(); }          // pp > 1
  ContextParallel* context_parallel() { return cp_.get(); }       // cp > 1
  ExpertParallel* expert_parallel() { return ep_.get(); }         // ep > 1
  int data_parallel() const { return mesh_.shape().dp(); }        // ranks that split the batch

  // The context of a training micro-step over `rows` samples of this rank, `before` of its samples
  // ahead of them in the optimizer step, which takes step_rows samples over all ranks; `base` gives
  // the rest (dropout, seed, step, precision). Row j's dropout keys are those of sample
  // dp_rank + dp·(before + j) of the step's global batch, as one rank running the whole batch draws
  // them; each row of the loss weighs dp / (step_rows · T), so that the data-parallel mean of the
  // gradients is the one-process mean, also when an epoch's last step leaves the ranks unequal
  // shares or none; a filler batch (no samples of its own) weighs nothing. Context parallel: the
  // context is this rank's share of the positions (T its share, `sequence` where they stand), each
  // row weighing dp / (step_rows · its T), as the gradients are averaged over dp × cp ranks.
  StepContext training_context(const StepContext& base, int64_t rows, int64_t before, int64_t step_rows,
                               bool filler) const;
  // One micro-step of training over a batch [ctx.B * ctx.T]: one pass of the model or, pipelined,
  // the schedule over its micro-batches. Gradients accumulate; last_micro_step: the optimizer
  // step's last, after which finish_gradients() follows.
  void forward_backward(const BatchView& batch, const StepContext& ctx, bool last_micro_step);
  // The training loss summed over rows since the last call, on every rank (context parallel: over
  // every share of the positions).
  double take_loss();
  // What the mixture-of-experts layers routed since the last call, summed over every rank's samples
  // and the pipeline's stages (collective over the data-parallel and pipeline ranks); empty without experts.
  ExpertLoad take_expert_load();
  // Evaluation: the loss summed over the batch's rows and the metric's count, on every rank of the
  // pipeline and tp group.
  EvalSums eval_sums(const BatchView& batch, const StepContext& ctx);
  // Whether every data-parallel rank must run the same evaluation passes (sharded parameters).
  bool eval_in_lockstep() const { return fsdp_ != nullptr; }

  // DDP: every replica takes data-parallel rank 0's weights (call once any checkpoint is loaded).
  void broadcast_parameters();
  UnitHooks* hooks();       // training passes
  UnitHooks* eval_hooks();  // evaluation passes (FSDP gathers; DDP has nothing to do)
  void zero_grad();  // a step begins
  // After a step's last micro-step: gradients averaged over the data-parallel ranks, and those a
  // tensor-parallel slice holds only its rows' share of summed over the slices. (Expert parallel: an
  // expert's gradient already holds the tokens its ep ranks sent it, so after the average over the
  // ranks holding that expert it is divided by ep.)
  void finish_gradients();
  // The global gradient norm (collective over the shard, tp, pp and, replicated, ep ranks).
  double grad_norm();
  // The step's end: finish_gradients(), then the optimizer's update at rate lr (Phase::optimizer),
  // the gradients first clipped to grad_clip by their global norm when grad_clip > 0; returns that
  // norm (0 when not clipping). Under plain DDP the update of each bucket's parameters starts as soon
  // as its average is in, while the buckets launched after it are still on the wire; clipping needs
  // every bucket, so then each bucket's sum of squares is taken as it comes and the update follows
  // the last (the same norm, added in the same order as grad_norm()).
  double finish_and_update(float lr, double grad_clip);
  // After the run: what each strategy moved in training steps and how much of it the computation hid,
  // as summary.json's keys (ddp_*, tp_*, pp_*, fsdp_*; the caller prints them). host_timing: the
  // collectives ran on the host's clock (Gloo), so DDP's overlap measured there means something.
  Json figures(bool host_timing) const;
  // Collective (every rank calls it after training, before figures()): DDP's waits combined over
  // its ranks (DataParallel::gather_figures), and over the pipeline ranks every stage's mean action
  // durations and every unit's training time, for the schedule simulated on measured costs and
  // the unit costs to balance the stages by (ddp_* and pp_* keys of figures()).
  void gather_figures();

 private:
  // Plain DDP (no strategy that touches the gradients after it): the update can follow each bucket.
  bool updates_per_bucket() const { return ddp_ && !fsdp_ && !tp_grads_ && !ep_ && !pipeline_; }
  void take_step_figures();  // the strategies' traffic of the step just finished
  void gather_pipeline_costs();  // gather_figures()'s pipeline part
  // An evaluation pass over this rank's rows (its share of the positions under context parallel).
  EvalSums eval_pass(const BatchView& batch, const StepContext& ctx);
  // Off: the gradients a backward completes are kept locally (not reduced yet).
  void set_sync(bool on);

  DeviceMesh& mesh_;
  std::unique_ptr<TensorParallelRegions> regions_;  // before the model, which refers to it
  std::unique_ptr<ContextParallel> cp_;              // the same
  std::unique_ptr<ExpertParallel> ep_;               // the same
  EpStats ep_train_;                                 // its traffic in training steps
  int64_t ep_steps_ = 0;
  std::vector<size_t> expert_shards_;                // the optimizer's shards of expert units
  CpStats cp_train_;                                 // its traffic in training steps (evaluations not counted)
  int64_t cp_steps_ = 0;
  TpSlice slice_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<FullyShardedDataParallel> fsdp_;
  std::unique_ptr<DataParallel> ddp_;
  DdpFigures ddp_figures_;  // gather_figures()
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<TensorParallelGrads> tp_grads_;
  std::unique_ptr<PipelineEngine> pipeline_;
  std::vector<MicroBatch> micro_;  // the running pass's micro-batches
  int64_t eval_pieces_ = 1;        // pipeline: forward passes per evaluation batch
  TpStats tp_train_;      // the regions' traffic from zero_grad to finish_gradients (evaluations not counted)
  int64_t tp_steps_ = 0;  // the steps it is of
  std::vector<StageCosts> pp_stage_seconds_;  // gather_pipeline_costs(): mean seconds per action, by stage
  std::vector<double> pp_unit_seconds_;       // and each unit's forward + backward seconds per pass
};

}  // namespace dtrain
