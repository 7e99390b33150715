// Module: what one unit of a model computes (DESIGN §3.1). A model kind (src/models/<kind>/) writes
// its units as modules; the generic Model (nn/model.hpp) runs them in stages, with activation slots
// and hooks, for every kind alike. A module knows nothing of ranks: tensor parallelism reaches it
// only through TpRegions.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "nn/context.hpp"
#include "nn/expert_load.hpp"
#include "nn/unit.hpp"

namespace dtrain {

class WeightGradStore;

// What the model keeps of its units' activations for backward (train.recompute, docs/model.md):
// everything; all but what a unit recomputes cheaply from the rest (selective: a block's attention
// probabilities and activation outputs); or of each hidden unit only its input, the unit's forward
// run again at the start of its backward (full).
enum class Recompute { none, selective, full };

// What a module's plan() keeps activations for (the Model decides it from the stages and recompute).
struct KeepPlan {
  // Sets of activations: one per micro-batch in flight; one for a unit recomputed in full (planned
  // in a region every such unit shares: overwritten by any of them between two of its calls).
  int slots = 1;
  bool selective = false;  // keep nothing the unit can recompute cheaply in backward (recomputes_selectively)
  // Under train.precision = bf16, where the device runs bf16 products: activations kept in bf16.
  // Those only matrix products read (activation functions' outputs, the attention's qkv and context,
  // pre-norm norm outputs), which the products round to bf16 anyway: keeping them so changes no
  // number. And those element-wise kernels read (the attention's probabilities, GELU's input,
  // SwiGLU's gate and up), which then read them rounded, in forward as in backward.
  bool bf16 = false;
  // Such an activation of n elements, from the arena, in the type the plan keeps them in.
  ActBuffer activation(Arena& arena, int64_t n) const {
    return ActBuffer::of(arena.alloc(n, bf16 ? DType::bf16 : DType::f32), bf16);
  }
};

// What a module's forward or backward is given besides its hidden state.
struct UnitPass {
  const StepContext& ctx;
  int slot = 0;                      // the micro-batch's activation slot
  const void* inputs = nullptr;      // the batch's inputs on the device (the input unit reads them)
  const int32_t* targets = nullptr;  // the batch's targets on the device (the loss unit reads them)
  bool backward = false;             // forward: a backward follows (the loss unit then computes its
                                     // gradients with the loss, fused)
  float* per_row = nullptr;          // loss unit, evaluation: each row's loss (host memory)
  float* per_row_device = nullptr;   // where the device writes them first, when not host memory
  double* loss_sum = nullptr;        // loss unit: adds its rows' losses here (device memory)
  double* metric_sum = nullptr;      // loss unit, evaluation: adds its metric's count here (a
                                     // classifier's right predictions; device memory), when given
  float* scratch = nullptr;          // scratch_floats() of device memory, for this call only
  // Split backward: where this unit's input half keeps, for this micro-batch, what its weight half
  // needs (weight_grad_floats(); null when backwards do not split or the unit needs none).
  WeightGradStore* weight_grads = nullptr;
};

// A model's units are, in order: one input unit (reads the batch's inputs: tokens, pixels), any
// number of hidden units, one loss unit (its forward ends in the loss). Each keeps, per activation
// slot, what its backward needs.
class Module {
 public:
  explicit Module(std::string name) : unit_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  Unit& unit() { return unit_; }
  const Unit& unit() const { return unit_; }
  // Its experts' unit, when it has one (a mixture-of-experts block's expert matrices, made by
  // add_expert_unit): a unit of the model of its own, next after this module's, so that expert
  // parallel splits it over ranks while the rest stays data parallel. The hooks see both.
  Unit* expert_unit() const { return experts_.get(); }
  Unit& add_expert_unit() {
    experts_ = std::make_unique<Unit>(unit_.name() + ".experts", true);
    return *experts_;
  }
  // Its unit, then its experts' unit if any.
  std::vector<Unit*> units() {
    std::vector<Unit*> u{&unit_};
    if (experts_) u.push_back(experts_.get());
    return u;
  }

  // Plans what the module keeps for keep.slots micro-batches of up to ctx.B samples of ctx.T rows
  // (the whole pass's shape at its largest). Called only for the units an instance holds (a
  // pipeline rank's stages), before anything is computed, and more than once: each call replaces
  // the last. A counting arena hands out null pointers: plan only, touch no memory then. Carve
  // only what forward writes before backward reads it (a unit recomputed in full plans in a region
  // the others overwrite), and constants only on the input and loss units (never recomputed).
  virtual void plan(Arena& arena, const StepContext& ctx, const KeepPlan& keep) = 0;
  // Split backward, after plan(): floats of what its weight half needs kept by its input half for one
  // micro-batch of ctx's shape (the WeightGradStore the model plans per slot and hands over in
  // UnitPass::weight_grads): each layer's output gradient and each layer's input that no activation
  // it keeps holds until then; with copy_inputs every layer's input (its activations are
  // overwritten before its weight half runs: recomputed in full).
  virtual int64_t weight_grad_floats(const StepContext& ctx, bool copy_inputs) const { return 0; }
  // Whether KeepPlan::selective makes it keep less (a model none of whose units do refuses
  // recompute = selective).
  virtual bool recomputes_selectively() const { return false; }
  // Device memory it needs only during one forward or backward call (one unit runs at a time, so
  // the model plans one scratch buffer for all): floats, for a pass of ctx's shape at its largest.
  virtual int64_t scratch_floats(const StepContext& ctx) const { return 0; }
  // Floats of its output for a pass of ctx's shape (this slice's rows under sequence parallel); 0
  // for the loss unit.
  virtual int64_t output_floats(const StepContext& ctx) const = 0;
  // Forward of one micro-batch. x: the previous unit's output (the input unit: null, it reads
  // p.inputs), unchanged until the slot's backward is done. The loss unit adds its rows' losses to
  // p.loss_sum (each row's to p.per_row, and its metric's count to p.metric_sum, when given). A hidden
  // unit recomputed in full gets the same call again at the start of its backward and must compute
  // the same bits (its dropout masks come from the pass's keys).
  virtual void forward(const float* x, const UnitPass& p) = 0;
  // Its output, kept in the slot until its backward (null for the loss unit).
  virtual const float* output(int slot) const = 0;
  // Backward: from dy (its output's gradient, which it may overwrite; the loss unit's came in
  // forward) the parameter gradients (accumulated) and dx, the input's gradient (none for the input
  // unit). part = input computes dx and keeps what part = weight, later, needs for the weight
  // gradients (in p.weight_grads); part = weight then gets no x, dy or dx — except the input unit,
  // whose weight half reads dy, its output's gradient, kept for it by the model.
  virtual void backward(const float* x, float* dy, float* dx, const UnitPass& p, BackwardPart part) = 0;
  // The loss unit: its outputs before the loss (a language model's logits, a classifier's class
  // scores), every row's, into host memory `out` [rows, outputs()]. Not in the step loop.
  virtual void predict(const float* x, const UnitPass& p, float* out) { DT_ASSERT(false && "not a loss unit"); }
  virtual int64_t outputs() const { return 0; }
  // Training FLOPs (forward and backward) for one sample of the configured size: the model's cost
  // figures and the pipeline's balance both come from these.
  virtual double train_flops_per_sample() const = 0;
  // A mixture of experts: adds what its routing saw since the last call into `load` and forgets it.
  virtual void take_expert_load(ExpertLoad& load) {}

 private:
  Unit unit_;
  std::unique_ptr<Unit> experts_;
};

}  // namespace dtrain
