// The weight-gradient half of a backward, kept for later: zero-bubble pipeline schedules run a
// unit's input gradient (I) first and its layers' weight gradients (W) afterwards. Per layer (a
// Linear, a Conv2d: anything with in_floats(), out_floats() per row and backward_weight) it keeps the
// layer's input and its output's gradient, copied into storage planned up front unless the input is
// a saved activation that lives until W anyway; an input or gradient stored in bf16 is kept in bf16. The model
// plans one per unit and micro-batch in flight (Module::weight_grad_floats) and hands it over in
// UnitPass::weight_grads.
#pragma once
#include <vector>

#include "nn/layers.hpp"

namespace dtrain {

class WeightGradStore {
 public:
  WeightGradStore() = default;
  // copy_inputs: every input is copied, whatever add() is told (the unit's activations are overwritten
  // before its W: recomputed in full).
  WeightGradStore(ComputeDevice& dev, float* storage, int64_t floats, bool copy_inputs = false)
      : dev_(&dev), base_(storage), cap_(floats), copy_inputs_(copy_inputs) {
    entries_.reserve(8);
  }
  // Keeps layer's weight gradient from x [rows, in_floats()] and dy [rows, out_floats()] for run(); x
  // is kept as is when x_lives (it stays unchanged until run), else copied, like dy.
  template <class Layer>
  void add(const Layer& layer, Operand x, bool x_lives, Operand dy, int64_t rows, Precision p) {
    const Operand xs = x_lives && !copy_inputs_ ? x : keep(x, rows * layer.in_floats());
    auto run = [](const void* l, Operand x, Operand dy, int64_t rows, Precision p) {
      static_cast<const Layer*>(l)->backward_weight(x, dy, rows, p);
    };
    entries_.push_back({&layer, run, xs, keep(dy, rows * layer.out_floats()), rows, p});
  }
  // Accumulates every kept weight gradient, then forgets them.
  void run() {
    for (const Entry& e : entries_) e.run(e.layer, e.x, e.dy, e.rows, e.p);
    entries_.clear();
    used_ = 0;
  }
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    const void* layer;
    void (*run)(const void* layer, Operand x, Operand dy, int64_t rows, Precision p);
    Operand x;
    Operand dy;
    int64_t rows;
    Precision p;
  };
  // A copy of n elements of src, in its type, in floats of the storage (bf16: two to a float).
  Operand keep(Operand src, int64_t n) {
    const int64_t floats = src.bf16 ? (n + 1) / 2 : n;
    DT_ASSERT(used_ + floats <= cap_ && "weight-gradient store planned too small");
    float* dst = base_ + used_;
    dev_->copy(dst, src.data, src.bytes(n));
    used_ += floats;
    return src.like(dst);
  }
  ComputeDevice* dev_ = nullptr;
  float* base_ = nullptr;
  int64_t cap_ = 0, used_ = 0;
  bool copy_inputs_ = false;
  std::vector<Entry> entries_;
};

}  // namespace dtrain
