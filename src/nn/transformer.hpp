// TransformerLM: token embedding unit → block units → head unit (final norm, classifier, fused
// loss). Explicit forward and backward; hooks let a caller act around every unit, the seam where
// data and model parallelism attach. Knows nothing of ranks.
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
};

class TransformerLM {
 public:
  // Plans every buffer for batches of up to max_batch samples of config.seq_len tokens.
  TransformerLM(const ModelConfig& config, int64_t max_batch);
  const ModelConfig& config() const { return c_; }
  const std::vector<Unit*>& units() const { return units_; }
  int64_t num_params() const { return num_params_; }
  int64_t max_batch() const { return max_batch_; }
  size_t activation_bytes() const { return arena_.bytes_used(); }

  void init_weights(uint64_t seed) { init_parameters(units_, seed); }
  void zero_grad();

  // Training: loss (sum of row losses) and, accumulated into the units' gradient buffers, the
  // gradient of ctx.loss_scale * that sum. ctx.training must be true for dropout; gradients are
  // computed either way.
  double forward_backward(const int32_t* inputs, const int32_t* targets, const StepContext& ctx,
                          UnitHooks* hooks = nullptr);
  // Evaluation: sum of row losses, no gradients (per_row optional [B*T]).
  double forward_loss(const int32_t* inputs, const int32_t* targets, const StepContext& ctx,
                      float* per_row = nullptr);
  // Logits [B*T, V] for every position (needs out sized B*T*V).
  void logits(const int32_t* inputs, const StepContext& ctx, float* out);

 private:
  const float* run_forward(const int32_t* inputs, const StepContext& ctx, UnitHooks* hooks);
  const float* head_weight() const;
  float* head_weight_grad() const;

  ModelConfig c_;
  int64_t max_batch_;
  Arena arena_;
  AlignedBuffer params_, grads_;
  int64_t num_params_ = 0;
  std::vector<Unit*> units_;
  Unit embed_unit_{"embed"}, head_unit_{"head"};
  ParamRef wte_, wpe_;
  std::vector<std::unique_ptr<Block>> blocks_;
  LayerNorm norm_f_;
  ParamRef head_w_, head_b_;
  float* pos_table_;  // sinusoidal table [T, d] (fixed positions)
  float* h0_;         // embedding output [rows, d]
  float* hf_;         // final norm output [rows, d]
  float* dhf_;        // its gradient [rows, d]
  Workspace ws_;
};

}  // namespace dtrain
