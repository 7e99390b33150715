// Model: a model's units (modules built by its kind, src/models/<kind>/) and everything every model
// shares, written once (DESIGN §3): parameter storage and its binding, the pipeline stages an
// instance holds, activation slots, the hook calls around every unit, the split backward, device
// copies of the batch, the host mirror of the parameters. Knows nothing of ranks.
#pragma once
#include <array>
#include <memory>
#include <vector>

#include "data/batch.hpp"
#include "kernels/device.hpp"
#include "nn/module.hpp"
#include "nn/weight_grads.hpp"

namespace dtrain {

// Called around every unit (DDP launches gradient reduction in post_backward, FSDP gathers in
// pre_forward, …). Default: nothing.
struct UnitHooks {
  virtual ~UnitHooks() = default;
  virtual void pre_forward(Unit&) {}
  virtual void post_forward(Unit&) {}
  virtual void pre_backward(Unit&) {}
  virtual void post_backward(Unit&) {}
  // Around each pass of the model: `backward` says whether a backward follows the forward (then the
  // loss unit writes its gradients during its forward: its last layer and the loss are fused).
  virtual void begin_pass(bool /*backward*/) {}
  virtual void end_pass() {}
};

// Which of the model's units this instance builds and runs, and how it keeps activations. Units
// are numbered model-wide in order (the input unit 0, the loss unit last). A stage is a contiguous
// range of them (DESIGN §3.2): pipeline parallelism builds a rank's stages only, and only their
// parameters exist there. Default: the whole model as one stage.
struct StagePlan {
  std::vector<std::pair<int, int>> stages;  // [first, last) unit ranges, ascending; empty: all units
  int slots = 1;                // micro-batches in flight, each keeping its own activations
  bool split_backward = false;  // backwards may run as input gradient (I), then weight gradients (W)
  // What the units keep (train.recompute). Selective is the modules' own; under full the model keeps
  // of each hidden unit (not the input or loss unit, nor one that reads another's parameters) only
  // its output per slot, which the next unit reads, plans the unit's activations once, in a region
  // all such units share, and runs the unit's forward again into it at the start of its backward.
  Recompute recompute = Recompute::none;
  // Context parallel: a pass holds 1/sequence_parts of each sample's positions (StepContext::sequence),
  // so the activations are planned for that many rows per sample.
  int sequence_parts = 1;
  // Activations kept in bf16 (KeepPlan::bf16 says which; train.precision = bf16).
  bool bf16_activations = false;
  // The parameters' bf16 copy that bf16 products read (Unit::bind_bf16), rounded once per update
  // rather than by every product: owned storage keeps one for the units products read.
  bool bf16_weights = false;
};

// Who provides the units' parameter and gradient storage: the model (one buffer each for all
// units), or a parallel strategy that binds each unit's storage itself (FSDP: a gathered buffer for
// the unit's hook window, the parameters otherwise living as shards).
enum class ParamStorage { owned, bound_by_caller };

// The model's units as a list, before any of them is planned: what the rest of dtrain may know of a
// model without building it (pipeline cuts, parameter counts, costs).
struct UnitList {
  // Every unit, in order. Its first parameter's model-wide index (the key of its initial values,
  // so that a unit built alone draws what it would in the whole model) is the count of parameters
  // declared before it: number_parameters() sets it.
  std::vector<std::unique_ptr<Module>> modules;
  SampleShape sample;                            // what one sample of its batches is
  int64_t rows_per_sample() const { return sample.targets; }  // each target is a row of the loss
  void number_parameters();
  int64_t num_params() const;                    // of the whole model: every slice and stage
  double train_flops_per_sample() const;
  std::vector<double> unit_costs() const;  // each unit's training FLOPs per sample
  bool recomputes_selectively() const;     // whether any unit keeps less under Recompute::selective
  // For every unit, the units whose parameters it also reads (a tied head reads the embedding's).
  std::vector<std::vector<int>> reads() const;
};

// An evaluation pass's sums: the rows' losses and the metric's count (ModelKind::metric: nothing for
// perplexity, which follows from the loss; a classifier's right predictions).
struct EvalSums {
  double loss = 0.0, metric = 0.0;
};

class Model {
 public:
  // Plans every buffer, on `device`, for batches of up to max_batch samples, for the units of
  // `stages` (the others are dropped: their parameters exist elsewhere).
  Model(UnitList units, int64_t max_batch, ComputeDevice& device = cpu_device(),
        ParamStorage storage = ParamStorage::owned, StagePlan stages = {});
  // The bytes of activations and buffers the same model would plan, without taking any memory.
  // (The units are planned on a counting arena and handed back, unchanged, to be built after.)
  static size_t planned_bytes(UnitList& units, int64_t max_batch, const StagePlan& stages);

  const std::vector<Unit*>& units() const { return units_; }  // the units this instance holds
  int num_units() const { return int(modules_.size()); }      // of the whole model
  int64_t num_params() const { return num_params_; }          // of the whole model, all slices and stages
  double train_flops_per_sample() const { return flops_per_sample_; }
  const SampleShape& sample_shape() const { return sample_; }
  int64_t max_batch() const { return max_batch_; }
  // What the plan takes (activations, stage buffers, scratch, the batch's copies): the arena's block
  size_t activation_bytes() const { return arena_.is_counting() ? arena_.bytes_used() : arena_.bytes_reserved(); }
  ComputeDevice& device() const { return dev_; }

  bool owns_params() const { return params_.data() != nullptr; }
  // Both need owned storage.
  void init_weights(uint64_t seed);
  void zero_grad();

  // All parameters in unit order as a host array (checkpoints read and write it): host_params()
  // returns it up to date; after writing into it, upload_host_params() makes the model use it.
  // On the CPU it is the model's own buffer. Owned storage only.
  float* host_params();
  void upload_host_params();
  // Rounds the parameters into their bf16 copy (where the model keeps one: owned storage,
  // StagePlan::bf16_weights). upload_host_params() and the optimizer's updates do; whoever writes
  // the parameters otherwise (a broadcast) calls it after.
  void refresh_bf16_weights();
  int64_t bf16_weight_bytes() const { return int64_t(params_bf16_.size()); }
  // Offset of a unit's parameters within that array.
  int64_t offset_of(const Unit& u) const;

  // Training time of each unit (host clock): [forward, backward (all parts)] seconds summed over
  // the training passes since time_units(true), by model-wide unit (zero for units not held). The
  // pipeline balances its stages and simulates its schedule from them.
  void time_units(bool on) { unit_seconds_.assign(on ? modules_.size() : 0, {0.0, 0.0}); }
  const std::vector<std::array<double, 2>>& unit_seconds() const { return unit_seconds_; }
  // What its mixture-of-experts layers routed since the last call (every unit asked, held or not, so
  // that every rank's load has the same size): empty for a model without experts.
  ExpertLoad take_expert_load();

  // Pipeline stages: those this instance holds, numbered 0..num_stages()-1 in model order. Batches
  // are host memory and stay unchanged until the slot's backward is done; hidden states are on the
  // device.
  int num_stages() const { return int(stages_.size()); }
  // Stage k's model-wide units [first, last), and unit u's training FLOPs per sample (this slice's).
  std::pair<int, int> stage_units(int k) const { return {stages_[size_t(k)].first, stages_[size_t(k)].last}; }
  double unit_flops(int u) const { return modules_[size_t(u)]->train_flops_per_sample(); }
  int64_t unit_output_floats(int u, const StepContext& ctx) const { return modules_[size_t(u)]->output_floats(ctx); }
  bool holds_whole_model() const;
  // Where the caller puts a stage's input (the previous stage's output) before its forward, and
  // its output's gradient before its backward; where the stage leaves its output after forward and
  // its input's gradient after backward. Null where there is none (the input unit's stage has no
  // input, the loss unit's no output).
  float* stage_input(int k, int slot) const { return stages_[k].in.empty() ? nullptr : stages_[k].in[slot]; }
  float* stage_output_grad(int k, int slot) const {
    return stages_[k].gout.empty() ? nullptr : stages_[k].gout[slot];
  }
  const float* stage_output(int k, int slot) const;
  const float* stage_input_grad(int k, int slot) const {
    return stages_[k].has_input_unit ? nullptr : stages_[k].gin[slot];
  }
  // Floats of stage k's input and output hidden states for a pass of ctx's shape.
  int64_t stage_input_floats(int k, const StepContext& ctx) const;
  int64_t stage_output_floats(int k, const StepContext& ctx) const;
  // Forward of stage k for the micro-batch kept in `slot`. A stage with the loss unit adds its row
  // losses to the loss sum (take_loss; per_row: each row's, without backward only) and, when a
  // backward follows, already computes that unit's gradients (its last layer and loss are fused).
  void stage_forward(int k, int slot, const BatchView& batch, const StepContext& ctx, bool backward, UnitHooks* hooks,
                     float* per_row = nullptr);
  // Its backward (all, or the input or weight half). Hooks: pre_backward before the input part,
  // post_backward once a unit's gradients are complete (after all, or after weight).
  void stage_backward(int k, int slot, const StepContext& ctx, BackwardPart part, UnitHooks* hooks);

  // The whole model in one pass (holds_whole_model()). Training: loss (sum of row losses) and,
  // accumulated into the units' gradient buffers, the gradient of ctx.loss_scale * that sum.
  // ctx.training must be true for dropout; gradients are computed either way.
  double forward_backward(const BatchView& batch, const StepContext& ctx, UnitHooks* hooks = nullptr);
  // The same, queued on the device without waiting: the loss is added to a sum on the device that
  // take_loss() reads (waiting then) and resets.
  void queue_forward_backward(const BatchView& batch, const StepContext& ctx, UnitHooks* hooks = nullptr);
  double take_loss();
  // Evaluation: sum of row losses, no gradients (per_row optional, one per row). The hooks see
  // every unit's forward, as in training (so that sharded parameters are gathered for it).
  double forward_loss(const BatchView& batch, const StepContext& ctx, float* per_row = nullptr,
                      UnitHooks* hooks = nullptr);
  // The same with the metric's count: both sums of the pass.
  EvalSums forward_eval(const BatchView& batch, const StepContext& ctx, UnitHooks* hooks = nullptr);
  // The metric's count added up by evaluation passes since the last call (waits for the device).
  double take_metric();
  // The loss unit's outputs before the loss (logits, class scores) for every row: out [rows,
  // outputs()]. Not in the step loop.
  void predict(const BatchView& batch, const StepContext& ctx, float* out, UnitHooks* hooks = nullptr);
  int64_t outputs() const { return modules_.back()->outputs(); }

 private:
  Model(UnitList units, int64_t max_batch, ComputeDevice& device, ParamStorage storage, StagePlan stages,
        bool counting);
  struct Stage {
    int first = 0, last = 0;  // [first, last) model-wide unit indices
    bool has_input_unit = false, has_loss_unit = false;
    std::vector<float*> in;    // per slot (not for the input unit's stage)
    std::vector<float*> gin;   // per slot: its input's gradient (the input unit's stage: the input
                               // unit's output's, for a split backward's W)
    std::vector<float*> gout;  // per slot (not for the loss unit's stage)
  };
  void plan(Arena& arena);
  // The bf16 copy of the parameters of the held units products read (StagePlan::bf16_weights).
  void bind_bf16_weights();
  // Plans the held units' activations (recomputed ones in one shared region), their kept outputs
  // and, for a split backward, their weight-gradient stores.
  void plan_units(Arena& arena, const StepContext& largest, const std::vector<int>& held);
  // Runs stage k's units forward up to (not including) unit `stop`.
  void forward_units(int k, int stop, const UnitPass& p, UnitHooks* hooks);
  // The input of unit u (model-wide) for `slot`: the previous unit's output, or the stage's input.
  const float* unit_input(int k, int u, int slot) const;
  // Unit u's output for `slot`: its own, or the model's copy of it (recomputed in full).
  const float* output_of(int u, int slot) const;
  // What unit u is given of stage pass p: its activation set (one for all slots when recomputed in
  // full) and its weight-gradient store for p's slot.
  UnitPass unit_pass(const UnitPass& p, int u);
  // The device's copy of a host array (the host array itself on the CPU).
  const void* to_device(const void* host, void* device_copy, size_t bytes);
  // What stage k's units get for `slot`: the batch copied to the device where the stage reads it.
  UnitPass pass(int k, int slot, const BatchView* batch, const StepContext& ctx);

  ComputeDevice& dev_;
  std::vector<std::unique_ptr<Module>> modules_;  // every unit, declared; only those of plan_.stages are planned and held
  SampleShape sample_;
  StagePlan plan_;
  int64_t max_batch_;
  int64_t num_params_ = 0;
  double flops_per_sample_ = 0.0;
  Arena arena_;
  Buffer params_, grads_, host_params_;
  Buffer params_bf16_;  // StagePlan::bf16_weights, owned storage: the parameters products read, rounded
  std::vector<Unit*> units_;
  std::vector<Stage> stages_;
  std::vector<char> recomputed_;                         // per unit (model-wide): recomputed in full
  std::vector<std::vector<float*>> kept_out_;            // per unit recomputed in full, per slot: its output
  std::vector<std::vector<WeightGradStore>> stores_;     // per unit, per slot (split backward): what W needs
  bool has_input_unit_ = false, has_loss_unit_ = false;
  std::vector<void*> inputs_;       // per slot: device copies of the batch's inputs
  std::vector<const void*> fed_;    // per slot: the inputs the input unit read (for its backward)
  int32_t* targets_ = nullptr;      // device copy of the batch's targets
  float* per_row_ = nullptr;        // row losses (evaluation on a device)
  double* loss_sum_ = nullptr;      // on the device
  double* metric_sum_ = nullptr;    // on the device, beside it
  float* grad_a_ = nullptr;         // hidden-state gradients, ping and pong (one unit's backward at a time)
  float* grad_b_ = nullptr;
  float* scratch_ = nullptr;        // shared by the units, one call at a time
  std::vector<std::array<double, 2>> unit_seconds_;  // time_units(): per unit, forward and backward
  // Where unit u's training time of `part` (0 forward, 1 backward) goes; null when not timed.
  double* unit_clock(int u, int part, bool training) {
    return training && size_t(u) < unit_seconds_.size() ? &unit_seconds_[size_t(u)][size_t(part)] : nullptr;
  }
};

}  // namespace dtrain
