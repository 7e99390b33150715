// A mixture-of-experts feed-forward as part of a unit (as Linear and Norm are): a router (a linear map
// to E scores, softmax or sigmoid), each token's top-k experts (ties to the lower expert) with their
// renormalised scores as weights, E SwiGLU experts run as one product per expert over the tokens
// routed to it, and the weighted sum back. Its parameters take Qwen3-MoE's names under `prefix`
// (PREFIX gate.weight [E, d]; PREFIX experts.M.{gate_proj,up_proj,down_proj}.weight). The
// sequence-wise balance loss (E / (k·T) · Σ_e count_e · P_e per sample, DeepSeek-V3's form) adds its
// gradient to the router's scores in backward. No rank, no collective.
#pragma once
#include <string>
#include <vector>

#include "kernels/device.hpp"
#include "nn/unit.hpp"
#include "tensor/arena.hpp"

namespace dtrain {

struct MoeSpec {
  int64_t dim = 0, experts = 0, top_k = 0, expert_ff = 0;
  bool sigmoid = false;   // router scores: sigmoid of each logit, else softmax over the experts
  bool normalize = true;  // the chosen scores renormalised to sum 1
};

class MoeLayer {
 public:
  MoeLayer() = default;
  MoeLayer(ComputeDevice& dev, Unit& u, const std::string& prefix, const MoeSpec& spec);
  const MoeSpec& spec() const { return spec_; }
  // What forward keeps for `slots` micro-batches of up to `rows` tokens.
  void plan(Arena& arena, int64_t rows, int slots);
  int64_t scratch_floats(int64_t rows) const;  // backward's
  // y [rows, d] (written) from x [rows, d].
  void forward(const float* x, float* y, int64_t rows, int slot, Precision p);
  // dx [rows, d] (written) from dy; the parameters' gradients accumulate. The balance loss of the
  // samples of T rows each adds aux_scale · its gradient (aux_scale: the loss's weight per sample).
  void backward(const float* x, const float* dy, float* dx, int64_t rows, int64_t T, float aux_scale, int slot,
                float* scratch, Precision p);
  // The balance loss of slot's pass, summed over its samples of T rows (forward must have run).
  double balance_loss_sum(int64_t T, int slot) const;
  const std::vector<int64_t>& tokens_per_expert(int slot) const { return saved_[size_t(slot)].counts; }
  double train_flops_per_token() const;  // the router and the k experts a token runs

 private:
  struct Saved {
    float *scores, *weights, *grouped, *hidden, *act, *out;  // grouped: x's rows by expert; out: the experts'
    int32_t *chosen, *row_of, *pos;
    std::vector<int64_t> counts, offsets;  // host: they size the experts' products
  };
  MoeRouting routing(int64_t rows) const;
  // Each expert's rows [offsets[e], offsets[e+1]) of the grouped buffers: f(e, first row, rows).
  template <class F>
  void each_expert(const Saved& s, F&& f) const;
  void balance_grad(const Saved& s, int64_t rows, int64_t T, float scale, float* dscores) const;

  ComputeDevice* dev_ = nullptr;
  MoeSpec spec_;
  ParamRef router_;
  std::vector<ParamRef> gate_up_, down_;  // gate_up_[e]: gate_proj then up_proj, adjacent: one [2f, d] matrix
  std::vector<Saved> saved_;
};

}  // namespace dtrain
