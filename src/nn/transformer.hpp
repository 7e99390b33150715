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
                TpRegions& regions = no_tp_regions());
  const ModelConfig& config() const { return c_; }
  const TpSlice& tp_slice() const { return slice_; }
  const std::vector<Unit*>& units() const { return units_; }
  int64_t num_params() const { return num_params_; }  // of the whole model, all slices
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

  // Token arrays are host memory: [B*T] each.
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
  // Embedding and blocks, then the head's pre_forward and its final norm: the output for the
  // classifier, the head's window still open (the caller ends it with post_forward).
  const float* run_forward(const int32_t* inputs, const StepContext& ctx, UnitHooks* hooks);
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
  int64_t max_batch_;
  Arena arena_;
  Buffer params_, grads_, host_params_;
  int64_t num_params_ = 0;
  std::vector<Unit*> units_;
  Unit embed_unit_{"embed"}, head_unit_{"head"};
  ParamRef wte_, wpe_;
  std::vector<std::unique_ptr<Block>> blocks_;
  LayerNorm norm_f_;
  ParamRef head_w_, head_b_;
  float* pos_table_;  // sinusoidal table [T, d] (fixed positions)
  float* h0_;         // embedding output [rows, d] (sequence parallel: this slice's rows)
  float* hf_;         // final norm output [rows, d]
  float* dhf_;        // its gradient [rows, d]
  int32_t *inputs_, *targets_;  // device copies of the batch's tokens [rows]
  float* per_row_;    // row losses [rows] (evaluation on a device)
  double* loss_sum_;  // on the device
  Workspace ws_;
};

}  // namespace dtrain
