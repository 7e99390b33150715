// A mixture-of-experts feed-forward as part of a unit (as Linear and Norm are): a router (a linear map
// to E scores, softmax or sigmoid), each token's top-k experts (ties to the lower expert) with their
// renormalised scores as weights, E SwiGLU experts run as one product per expert over the tokens
// routed to it, and the weighted sum back. Its parameters take Qwen3-MoE's names under `prefix`
// (PREFIX gate.weight [E, d]; PREFIX experts.M.{gate_proj,up_proj,down_proj}.weight). The
// sequence-wise balance loss (E / (k·T) · Σ_e count_e · P_e per sample, DeepSeek-V3's form) adds its
// gradient to the router's scores in backward. The router lives in its module's unit, the experts in
// the module's expert unit. Expert parallel: this rank holds a share of the experts, and tokens travel
// to them and back through an ExpertExchange; no rank, no collective here.
#pragma once
#include <string>
#include <vector>

#include "kernels/device.hpp"
#include "nn/expert_exchange.hpp"
#include "nn/expert_load.hpp"
#include "nn/sequence_attention.hpp"
#include "nn/unit.hpp"
#include "tensor/arena.hpp"

namespace dtrain {

// A product over `rows` rows as the layer runs an expert's: f(first row, rows) for pieces of 256 rows
// and a tail cut into powers of two. oneDNN then meets at most nine row counts however the router
// spreads the tokens: it makes a kernel per row count and keeps it, so a new count every step would
// cost a kernel's making each time and memory that only grows.
template <class F>
void moe_row_pieces(int64_t rows, F&& f) {
  constexpr int64_t kPiece = 256;
  int64_t r = 0;
  for (; rows - r >= kPiece; r += kPiece) f(r, kPiece);
  for (int64_t n = kPiece / 2; n > 0; n /= 2)
    if (rows - r >= n) {
      f(r, n);
      r += n;
    }
}

struct MoeSpec {
  int64_t dim = 0, experts = 0, top_k = 0, expert_ff = 0;
  bool sigmoid = false;   // router scores: sigmoid of each logit, else softmax over the experts
  bool normalize = true;  // the chosen scores renormalised to sum 1
  float capacity_factor = 0.0f;  // 0: dropless; else an expert takes ceil(factor · T · k / E) copies of a sample
};

class MoeLayer {
 public:
  MoeLayer() = default;
  // The router in `u`, the experts in `experts` (their module's expert unit): all of them, or under
  // expert parallel (exchange not null) this rank's share, under their global names. Tensor
  // parallel: each expert's width cut over the slices (gate and up by rows, down by columns), so the
  // output, the input's gradient and the router's gradient are each slice's partial sum (the caller
  // sums the first two over the slices; the router's is marked partial); rows are never split.
  // Context parallel: `sequence` sums the balance loss's counts over each sequence's shares.
  MoeLayer(ComputeDevice& dev, Unit& u, Unit& experts, const std::string& prefix, const MoeSpec& spec,
           ExpertExchange* exchange = nullptr, TpSlice slice = {}, SequenceAttention* sequence = nullptr);
  const MoeSpec& spec() const { return spec_; }
  // What forward keeps for `slots` micro-batches of up to `rows` tokens (the experts' gate and up, and
  // their SwiGLU output, in bf16 with bf16_act: KeepPlan::bf16).
  void plan(Arena& arena, int64_t rows, int slots, bool bf16_act = false);
  int64_t scratch_floats(int64_t rows) const;  // forward's or backward's, whichever is more
  // y [rows, d] (written) from x [rows, d], samples of T rows each (context parallel: the positions
  // `sequence` of each).
  void forward(const float* x, float* y, int64_t rows, int64_t T, const SequenceShard& sequence, int slot,
               float* scratch, Precision p);
  // dx [rows, d] (written) from dy; the parameters' gradients accumulate. Each sample's balance loss
  // adds aux_scale · its gradient (aux_scale: the loss's weight per whole sample). counted: the pass's
  // routing counts in take_load (not a data-parallel filler's, which weighs nothing).
  void backward(const float* x, const float* dy, float* dx, int64_t rows, float aux_scale, int slot, float* scratch,
                Precision p, bool counted = true);
  // The balance loss of slot's pass, summed over its samples (forward must have run; context
  // parallel: this share's part of it).
  double balance_loss_sum(int slot) const;
  const std::vector<int64_t>& tokens_per_expert(int slot) const { return saved_[size_t(slot)].counts; }
  // What the backward passes since the last call routed, into `load` as layer `layer` of `layers`,
  // its balance loss weighted by `weight` (layer 0 also counts the samples); then forgotten.
  void take_load(ExpertLoad& load, int64_t layer, int64_t layers, double weight);
  double train_flops_per_token() const;  // the router and the k experts a token runs

 private:
  // What a pass keeps. Rows "by expert" are this rank's tokens' copies grouped by their chosen expert
  // (grouped, out: rows·k of them); the experts held here run over the rows "at the experts" (every
  // rank's copies routed to them, grouped by expert, then by the rank they came from: expert_x,
  // hidden, act), which in one process are the grouped rows themselves.
  struct Saved {
    float *scores, *weights, *grouped, *out, *expert_x;
    ActBuffer hidden, act;  // the experts' gate and up, SwiGLU's output (bf16 with bf16_act)
    int32_t *chosen, *row_of, *pos;
    int64_t rows = 0, T = 0, T_whole = 0;  // of the pass: rows, a sample's rows here and its whole length
    std::vector<float> sample_counts;      // [sample · E + e]: its copies routed to e (count_samples)
    // host: they size the experts' products and the exchanges
    std::vector<int64_t> counts, offsets;      // this rank's rows per expert (all E), and where each starts
    std::vector<int64_t> from;                 // [rank j · held + e]: rows rank j sends to held expert e
    std::vector<int64_t> at_counts, at_offsets;  // rows at each held expert
    std::vector<int64_t> send_rows, recv_rows;   // per rank, dispatching (combining swaps them)
  };
  // Scratch of one call (see scratch_floats): the exchanges' staging and backward's gradients.
  struct Work {
    float *stage, *expert_y;                     // forward (and dhidden: gate and up staged, kept in bf16)
    float *dgrouped, *dweights, *dexpert, *dact, *dhidden, *dscores, *dlogits;  // backward
  };
  Work carve(float* scratch, int64_t rows) const;
  int64_t at_experts_rows(int64_t rows) const;  // the most rows the held experts can get
  MoeRouting routing(int64_t rows, int64_t T) const;
  // Each held expert's rows [at_offsets[e], at_offsets[e+1]) of the rows at the experts: f(e, first row, rows).
  template <class F>
  void each_expert(const Saved& s, F&& f) const;
  // Expert parallel: the routing's counts exchanged (what each rank sends each held expert).
  void exchange_counts(Saved& s);
  // Rows by expert (this rank's) → rows at the experts (every rank's, grouped by held expert), through
  // `stage`; and back.
  void dispatch(const Saved& s, const float* by_expert, float* stage, float* at_experts, int64_t width);
  void combine_back(const Saved& s, const float* at_experts, float* stage, float* by_expert, int64_t width);
  void count_samples(Saved& s);
  void balance_grad(const Saved& s, float scale, float* dscores) const;
  void note_load(const Saved& s, int slot);  // a backward's routing, for take_load

  ComputeDevice* dev_ = nullptr;
  MoeSpec spec_;
  ExpertExchange* exchange_ = nullptr;
  SequenceAttention* sequence_ = nullptr;
  int64_t held_ = 0, first_ = 0;  // experts held here: [first_, first_ + held_)
  int64_t ff_ = 0;                 // each expert's width in this tensor-parallel slice
  int slices_ = 1;                 // tensor-parallel slices
  ParamRef router_;
  std::vector<ParamRef> gate_up_, down_;  // by held expert; gate_up_[e]: gate_proj then up_proj, adjacent: one [2f, d] matrix
  std::vector<Saved> saved_;
  std::vector<int64_t> next_;                // host scratch, sized by plan(): regroup's
  mutable std::vector<double> per_expert_;  // and the balance loss's
  std::vector<double> routed_;          // since take_load: tokens per expert (all E)
  double balance_ = 0.0, samples_ = 0.0, dropped_ = 0.0;  // the balance loss summed over samples, their
                                                          // count, token copies dropped by the capacity
};

}  // namespace dtrain
