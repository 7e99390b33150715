// TransformerLM: token embedding unit → block units → head unit (final norm, classifier, fused
// loss). Explicit forward and backward on a ComputeDevice; hooks let a caller act around every unit,
// the seam where data and model parallelism attach. Knows nothing of ranks: under tensor
// parallelism it is one slice (TpSlice) and meets the others through TpRegions.
#pragma once
#include <memory>
#include <vector>

#include "nn/block.hpp"

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
  // head writes its gradients during its forward: the classifier and loss are fused).
  virtual void begin_pass(bool /*backward*/) {}
  virtual void end_pass() {}
};

// Which of the model's units this instance builds and runs, and how it keeps activations. Units
// are numbered model-wide: 0 the embedding, 1..layers the blocks, layers+1 the head. A stage is a
// contiguous range of them (DESIGN §3.2): pipeline parallelism builds a rank's stages only, and
// only their parameters exist there. Default: the whole model as one stage.
struct StagePlan {
  std::vector<std::pair<int, int>> stages;  // [first, last) unit ranges, ascending; empty: all units
  int slots = 1;                // micro-batches in flight, each keeping its own activations
  bool split_backward = false;  // backwards may run as input gradient (I), then weight gradients (W)
};

// Who provides the units' parameter and gradient storage: the model (one buffer each for all
// units), or a parallel strategy that binds each unit's storage itself (FSDP: a gathered buffer for
// the unit's hook window, the parameters otherwise living as shards).
enum class ParamStorage { owned, bound_by_caller };

class TransformerLM {
 public:
  // Plans every buffer, on `device`, for batches of up to max_batch samples of config.seq_len tokens.
  // Tensor parallel: `slice` of the model (whole heads, a share of the feed-forward width and of
  // the vocabulary), joined to the other slices by `regions`.
  TransformerLM(const ModelConfig& config, int64_t max_batch, ComputeDevice& device = cpu_device(),
                ParamStorage storage = ParamStorage::owned, TpSlice slice = {},
                TpRegions& regions = no_tp_regions(), StagePlan stages = {});
  const ModelConfig& config() const { return c_; }
  const TpSlice& tp_slice() const { return slice_; }
  const std::vector<Unit*>& units() const { return units_; }  // the units this instance holds
  int64_t num_params() const { return num_params_; }  // of the whole model, all slices and stages
  int64_t max_batch() const { return max_batch_; }
  size_t activation_bytes() const { return arena_.bytes_used(); }
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
  // Offset of a unit's parameters within that array.
  int64_t offset_of(const Unit& u) const;

  // Pipeline stages: those this instance holds, numbered 0..num_stages()-1 in model order. Token
  // arrays are host memory [B*T], and stay unchanged until the slot's backward is done; hidden
  // states are [rows, d] (this slice's rows under sequence parallel) on the device.
  int num_stages() const { return int(stages_.size()); }
  bool holds_whole_model() const;
  // Where the caller puts a stage's input (the previous stage's output) before its forward, and
  // its output's gradient before its backward; where the stage leaves its output after forward and
  // its input's gradient after backward. Null where there is none (the embedding's stage has no
  // input, the head's no output).
  float* stage_input(int k, int slot) const { return stages_[k].in.empty() ? nullptr : stages_[k].in[slot]; }
  float* stage_output_grad(int k, int slot) const {
    return stages_[k].gout.empty() ? nullptr : stages_[k].gout[slot];
  }
  const float* stage_output(int k, int slot) const;
  const float* stage_input_grad(int k, int slot) const {
    return stages_[k].has_embed ? nullptr : stages_[k].gin[slot];
  }
  // Floats of a hidden state for a pass of ctx's shape.
  int64_t hidden_floats(const StepContext& ctx) const { return slice_.local_rows(ctx.rows()) * c_.dim; }
  // Forward of stage k for the micro-batch kept in `slot`. A stage with the head adds its row losses
  // to the loss sum (take_loss; per_row: each row's, without backward only) and, when a backward
  // follows, already computes the classifier's gradients (the classifier and loss are fused).
  void stage_forward(int k, int slot, const int32_t* inputs, const int32_t* targets, const StepContext& ctx,
                     bool backward, UnitHooks* hooks, float* per_row = nullptr);
  // Its backward (all, or the input or weight half). Hooks: pre_backward before the input part,
  // post_backward once a unit's gradients are complete (after all, or after weight).
  void stage_backward(int k, int slot, const StepContext& ctx, BackwardPart part, UnitHooks* hooks);

  // The whole model in one pass (holds_whole_model()). Token arrays are host memory: [B*T] each.
  // Training: loss (sum of row losses) and, accumulated into the units' gradient buffers, the
  // gradient of ctx.loss_scale * that sum. ctx.training must be true for dropout; gradients are
  // computed either way.
  double forward_backward(const int32_t* inputs, const int32_t* targets, const StepContext& ctx,
                          UnitHooks* hooks = nullptr);
  // The same, queued on the device without waiting: the loss is added to a sum on the device that
  // take_loss() reads (waiting then) and resets.
  void queue_forward_backward(const int32_t* inputs, const int32_t* targets, const StepContext& ctx,
                              UnitHooks* hooks = nullptr);
  double take_loss();
  // Evaluation: sum of row losses, no gradients (per_row optional [B*T]). The hooks see every
  // unit's forward, as in training (so that sharded parameters are gathered for it).
  double forward_loss(const int32_t* inputs, const int32_t* targets, const StepContext& ctx,
                      float* per_row = nullptr, UnitHooks* hooks = nullptr);
  // Logits [B*T, V] for every position (needs out sized B*T*V).
  void logits(const int32_t* inputs, const StepContext& ctx, float* out, UnitHooks* hooks = nullptr);

 private:
  struct Stage {
    int first = 0, last = 0;  // [first, last) model-wide unit indices
    bool has_embed = false, has_head = false;
    std::vector<Block*> blocks;  // in order
    std::vector<float*> in;      // per slot (not for the embedding's stage)
    std::vector<float*> gin;     // per slot: its input's gradient (the embedding's stage: the
                                 // embedding output's, for a split backward's W)
    std::vector<float*> gout;    // per slot (not for the head's stage)
  };
  // A stage's units up to the head's pre_forward and final norm: the input of the classifier (the
  // head's window is open: the caller runs the classifier, then post_forward). Null without the head.
  const float* forward_units(int k, int slot, const int32_t* inputs, const StepContext& ctx, UnitHooks* hooks);
  // The input of stage k's block j (its position in the stage) or, j = blocks.size(), of its head.
  const float* unit_input(int k, int j, int slot) const;
  // The embedding's backward from its output's gradient g (changed in place).
  void embedding_backward(float* g, int slot, const StepContext& ctx);
  // The device's copy of a host token array (the host array itself on the CPU).
  const int32_t* stage(const int32_t* host, int32_t* device_copy, int64_t n);
  const float* head_weight() const;
  float* head_weight_grad() const;
  // The vocabulary slice this model's embedding and classifier hold.
  VocabRange vocab_range() const;
  // The classifier and loss over all rows of the head's input `h` (this slice's rows), with the
  // vocabulary slices' row statistics combined; in training dx gets the input's gradient.
  ClassifierArgs classifier_args(const float* h, const int32_t* targets, const StepContext& ctx);

  ComputeDevice& dev_;
  ModelConfig c_;
  TpSlice slice_;
  TpRegions& regions_;
  StagePlan plan_;
  int64_t max_batch_;
  Arena arena_;
  Buffer params_, grads_, host_params_;
  int64_t num_params_ = 0;
  std::vector<Unit*> units_;
  std::vector<Stage> stages_;
  Unit embed_unit_{"embed"}, head_unit_{"head"};
  bool has_embed_ = false, has_head_ = false;
  ParamRef wte_, wpe_;
  std::vector<std::unique_ptr<Block>> blocks_;  // [layers], null where another stage holds it
  LayerNorm norm_f_;
  ParamRef head_w_, head_b_;
  float* pos_table_ = nullptr;  // sinusoidal table [T, d] (fixed positions)
  std::vector<float*> h0_;      // per slot: embedding output [rows, d] (sequence parallel: this slice's rows)
  float* hf_ = nullptr;         // final norm output [rows, d]
  std::vector<float*> dhf_;     // per slot: its gradient [rows, d], computed in forward
  std::vector<int32_t*> inputs_;  // per slot: device copies of the batch's tokens [rows]
  std::vector<const int32_t*> tokens_;  // per slot: the tokens the embedding read (for its backward)
  int32_t* targets_ = nullptr;
  float* per_row_ = nullptr;  // row losses [rows] (evaluation on a device)
  double* loss_sum_ = nullptr;  // on the device
  Workspace ws_;
};

}  // namespace dtrain
