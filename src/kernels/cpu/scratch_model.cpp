// cpu_scratch_model (kernels/counting_device.hpp): the scratch the CPU kernels would keep, from the
// sizes they take it with — the grow-only slots of scratch.cpp (the largest request of each) and the
// products' bf16 copies of their operands (matmul.cpp) — for the planner's counting device.
#include <algorithm>

#include "kernels/counting_device.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/attention_blocks.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/scratch.hpp"

namespace dtrain {

namespace {

class CpuScratchModel final : public ScratchModel {
 public:
  explicit CpuScratchModel(bool bf16_products) : bf16_(bf16_products) {}
  // as matmul.cpp takes them: copies of the f32 operands of a bf16 product, or (no bf16 products
  // here) widened copies of the bf16 ones
  void matmul(const MatmulArgs& args, bool a_bf16 = false, bool b_bf16 = false) override {
    if (args.M == 0 || args.N == 0) return;
    const MatmulArgs a = matmul_args_for(args, a_bf16, b_bf16);
    const bool copies = matmul_copies_to_bf16(a, bf16_);
    int64_t& at_a = copies ? bf16_a_ : wide_a_;
    int64_t& at_b = copies ? bf16_b_ : wide_b_;
    if (copies != a_bf16) at_a = std::max(at_a, a.M * a.K);
    if (copies != b_bf16) at_b = std::max(at_b, a.K * a.N);
  }
  void norm_backward(bool rms, int64_t rows, int64_t dim) override {
    if (rows <= 0 || dim <= 0) return;
    if (rms)
      take(ScratchSlot::rmsnorm, rmsnorm_backward_scratch_floats(rows, dim));
    else
      take(ScratchSlot::layernorm, layernorm_backward_scratch_floats(rows, dim));
  }
  // as attention.cpp takes them
  void attention(const AttentionShape& s, const DropoutSpec& d, AttentionPass pass, bool qkv_bf16,
                 bool probs_bf16) override {
    const int64_t n = attention_scores_floats(s), half = (n + 1) / 2;
    const bool backward = pass == AttentionPass::backward, output = pass == AttentionPass::forward;
    if (!attention_in_bf16(s, qkv_bf16, probs_bf16, bf16_)) {  // one slot: the dropped probabilities, then dP
      if (backward || (d.active() && pass != AttentionPass::probabilities)) take(ScratchSlot::attention, n);
      return;
    }
    if (!qkv_bf16) bf16_a_ = std::max(bf16_a_, s.B * s.T * s.row_width());
    if (backward) {
      take(ScratchSlot::attention, n);          // dP
      take(ScratchSlot::attention_grad, half);  // the dropped probabilities, then dS
      bf16_b_ = std::max(bf16_b_, s.B * s.T * s.H * s.Dh);  // dO
      return;
    }
    if (probs_bf16) take(ScratchSlot::attention, n);  // the scores
    if (output && (d.active() || !probs_bf16)) take(ScratchSlot::attention_grad, half);  // the dropped probabilities
  }
  void attention_block(const AttentionBlocks& a, const SequenceShard& keys, bool backward) override {
    const int64_t n = attention_block_scores_floats(a, keys);
    take(ScratchSlot::attention, n);
    if (backward) take(ScratchSlot::attention_grad, n);
  }
  void rope(const RopeShape& s) override {
    if (s.B * s.T > 0) take(ScratchSlot::rope, rope_scratch_floats(s));
  }
  // its slot, and (bf16) the copies of its operands: made once (classifier_converts_once; none of
  // weights given in bf16) or by its three products of a chunk of rows, as matmul() makes them (a
  // bound: the logits' product runs on a piece of the chunk)
  void classifier_loss(const ClassifierArgs& a) override {
    take(ScratchSlot::classifier, classifier_scratch_floats(a, bf16_));
    const int64_t rows = classifier_chunk_rows(a, bf16_);
    if (rows == 0) return;
    if (classifier_converts_once(a, bf16_)) {
      if (!a.W.bf16) bf16_b_ = std::max(bf16_b_, a.V * a.d);
      bf16_c_ = std::max(bf16_c_, rows * a.d);
      if (a.dx) bf16_a_ = std::max(bf16_a_, rows * a.V);
      return;
    }
    matmul(linear_forward_args(rows, a.d, a.V, a.bias, a.precision), false, a.W.bf16);
    if (!a.dx) return;
    matmul(linear_backward_input_args(rows, a.d, a.V, false, a.precision), false, a.W.bf16);
    matmul(linear_backward_weight_args(rows, a.d, a.V, a.precision));
  }
  size_t bytes() const override {
    int64_t floats = 0;
    for (int64_t n : slots_) floats += n;
    return size_t(floats + wide_a_ + wide_b_) * sizeof(float) + size_t(bf16_a_ + bf16_b_ + bf16_c_) * sizeof(uint16_t);
  }

 private:
  void take(ScratchSlot slot, int64_t floats) { slots_[int(slot)] = std::max(slots_[int(slot)], floats); }

  bool bf16_;  // whether the CPU has bf16 products
  int64_t slots_[int(ScratchSlot::count)] = {};
  int64_t bf16_a_ = 0, bf16_b_ = 0, bf16_c_ = 0;  // matmul.cpp's three copy buffers
  int64_t wide_a_ = 0, wide_b_ = 0;               // and its two widening buffers
};

}  // namespace

std::unique_ptr<ScratchModel> cpu_scratch_model(bool bf16_products) {
  return std::make_unique<CpuScratchModel>(bf16_products);
}

}  // namespace dtrain
