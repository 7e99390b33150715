// Optimizers over the parameter shards a rank owns (all of them on one device): AdamW and SGD with
// state in buffers planned up front, learning-rate schedules, and global-norm gradient clipping.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/device.hpp"
#include "nn/unit.hpp"

namespace dtrain {

// A contiguous run of parameters with its gradient (a unit's buffer, or a shard of it), and the
// parameters' bf16 copy where bf16 products read one (Unit::bind_bf16): every update rounds into it.
struct ParamShard {
  float* param;
  float* grad;
  int64_t numel;
  uint16_t* bf16 = nullptr;
};

// One shard per unit: everything, as a single process owns it (with the units' bf16 copies, which
// must be bound before: the optimizer refreshes the copies it was given).
std::vector<ParamShard> unit_shards(const std::vector<Unit*>& units);

struct OptimizerConfig {
  std::string name = "adamw";  // adamw | sgd
  float lr = 0.002f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.01f;
  float momentum = 0.0f;  // sgd
  float grad_clip = 0.0f;  // max global gradient norm; 0 = off
  std::string schedule = "constant";  // constant | cosine | linear
  int64_t warmup_steps = 0;
  float min_lr_ratio = 0.0f;  // floor of cosine/linear decay, as a fraction of lr
  void validate() const;
};

class Optimizer {
 public:
  // The shards and the optimizer state live on `device`; updates run there.
  Optimizer(const OptimizerConfig& c, std::vector<ParamShard> shards, ComputeDevice& device = cpu_device());
  // Learning rate used by step number `step` (0-based) of `total_steps`.
  float lr_at(int64_t step, int64_t total_steps) const;
  // Sum of squared gradients over these shards (the global norm is its square root, after a sharded
  // caller sums it across the shard ranks). On a GPU this waits for the device.
  const std::vector<ParamShard>& shards() const { return shards_; }
  double grad_sumsq();
  // The same over the shards whose indices `only` lists.
  double grad_sumsq(const std::vector<size_t>& only);
  // Bytes of optimizer state (momentum, second moments) this optimizer allocated.
  int64_t state_bytes() const;
  // The sum of squared gradients of each shard `only` lists, kept apart (squared_grads_total adds
  // them): a caller may square the shards as their gradients become final, in any order.
  void square_grads(const std::vector<size_t>& only);
  // The squares kept of the shards `only` lists (all of them: every shard), added in that order.
  double squared_grads_total(const std::vector<size_t>& only);
  double squared_grads_total() { return squared_grads_total(all_); }
  // Multiplies every gradient by `factor` (a clip: the largest norm over the global norm).
  void scale_grads(float factor);
  // One update with learning rate lr.
  void step(float lr);
  // The same in parts: begin_step(), then update() of every shard once, in any order and grouping.
  void begin_step() { ++step_; }
  void update(float lr, const std::vector<size_t>& only);
  void update(float lr) { update(lr, all_); }
  int64_t steps_taken() const { return step_; }
  const OptimizerConfig& config() const { return c_; }

  // State for checkpoints: named flat host buffers (e.g. "exp_avg.0") plus the step counter;
  // state() returns them up to date, and after writing into them, upload_state() makes the
  // optimizer use them (both no-ops on the CPU, where they are the state itself).
  struct StateView {
    std::string name;    // family.shard, e.g. "exp_avg.3"
    std::string family;  // exp_avg, exp_avg_sq (adamw) or momentum (sgd)
    size_t shard;        // which of the shards it belongs to (laid out like that shard's parameters)
    float* data;
    int64_t numel;
  };
  std::vector<StateView> state();
  void upload_state();
  void set_steps_taken(int64_t s) { step_ = s; }

 private:
  OptimizerConfig c_;
  std::vector<ParamShard> shards_;
  ComputeDevice& dev_;
  std::vector<Buffer> m_, v_;
  std::vector<Buffer> host_m_, host_v_;  // host copies for checkpoints (devices other than the CPU)
  Buffer norm_sq_;                       // doubles on the device: each shard's sum of squares (square_grads)
  std::vector<size_t> all_;              // every shard's index
  std::vector<double> squares_;          // the per-shard squares, read back (squared_grads_total)
  int64_t step_ = 0;
};

}  // namespace dtrain
