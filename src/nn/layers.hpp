// The two parameterised building blocks: Linear ([out, in] weights as in PyTorch, optional bias)
// and Norm (LayerNorm or RMSNorm, keeping its own per-row statistics for backward), run on a
// ComputeDevice.
// Under tensor parallelism a Linear holds a slice: its output features (column parallel) or its
// input features (row parallel, whose outputs are partial sums the caller adds up).
#pragma once
#include <string>

#include "kernels/device.hpp"
#include "nn/unit.hpp"

namespace dtrain {

// y = the n floats compute(out) writes: into y itself, or (y kept in bf16) into
// `staging` [n] first, then rounded. A norm's output, the attention's context.
template <class F>
void write_activation(ComputeDevice& dev, ActBuffer y, float* staging, int64_t n, F&& compute) {
  float* out = y.bf16 ? staging : y.f32();
  DT_ASSERT(out);
  compute(out);
  if (y.bf16) dev.to_bf16(out, y.b16(), n);
}

// The weight w as a product with `other` reads it: its bf16 copy (ParamRef::operand) where the product
// takes bf16 inputs anyway (the other operand is bf16, or the device copies f32 operands to bf16),
// otherwise its f32 values, which such a device's bf16 product reads as they are.
inline Operand weight_operand(const ComputeDevice& dev, const ParamRef& w, Operand other, Precision p) {
  return other.bf16 || dev.bf16_products_copy_f32_operands() ? w.operand(p) : Operand(w.data());
}

// none: whole; columns: a slice of the outputs (of each of `blocks` output blocks); rows: a slice of
// the inputs.
enum class LinearCut { none, columns, rows };

struct Linear {
  int64_t in = 0, out = 0;  // this slice's
  ParamRef w, b;
  bool has_bias = false;
  bool bias_in_forward = true;  // row parallel: only slice 0 adds the bias into its partial sum
  ComputeDevice* dev = nullptr;

  Linear() = default;
  // weight_init: Xavier (the Transformer's), or fan_in_uniform (PyTorch's default: ±1/√in).
  Linear(ComputeDevice& d, Unit& u, const std::string& name, int64_t in_, int64_t out_, bool bias, Init bias_init,
         LinearCut cut = LinearCut::none, TpSlice slice = {}, int blocks = 1, Init weight_init = Init::xavier)
      : has_bias(bias), dev(&d) {
    const TpSplit none, w_split = cut == LinearCut::columns ? TpSplit{0, blocks}
                                  : cut == LinearCut::rows  ? TpSplit{1, 1}
                                                            : none;
    w = u.add(name + ".weight", {out_, in_}, weight_init, in_, w_split, slice);
    u.set_read_by_products();
    if (bias) b = u.add(name + ".bias", {out_}, bias_init, in_, cut == LinearCut::columns ? w_split : none, slice);
    out = w.info().shape[0];
    in = w.info().shape[1];
    bias_in_forward = cut != LinearCut::rows || slice.index == 0;
  }
  int64_t in_floats() const { return in; }  // per row
  int64_t out_floats() const { return out; }
  // x may be stored in bf16 (an activation kept in bf16): the products are then bf16 ones. They read
  // the weight's bf16 copy where the unit has one (weight_operand). relu: y = ReLU(x Wᵀ + b), in the
  // product's pass.
  void forward(Operand x, float* y, int64_t rows, Precision p, bool relu = false) const {
    const float* bias = has_bias && bias_in_forward ? b.data() : nullptr;
    DT_ASSERT(!relu || bias_in_forward);  // not on a row-parallel slice's partial sum
    MatmulArgs args = linear_forward_args(rows, in, out, bias, p);
    args.relu = relu;
    dev->matmul(x, weight_operand(*dev, w, x, p), y, args);
  }
  // Accumulates dW, db; writes (or adds to) dx unless dx is null. dy may be stored in bf16 (a gradient
  // kept for products: the bias gradient sums its rounded values).
  void backward(Operand x, Operand dy, float* dx, int64_t rows, bool accumulate_dx,
                Precision p) const {
    if (!dx) return backward_weight(x, dy, rows, p);
    if (has_bias) dev->colsum_accumulate(dy, b.grad(), rows, out);
    dev->linear_backward(x, dy, weight_operand(*dev, w, dy, p), w.grad(), dx, rows, in, out, accumulate_dx, p);
  }
  // The two halves of backward, which zero-bubble pipeline schedules run apart (I, then W).
  void backward_input(Operand dy, float* dx, int64_t rows, bool accumulate_dx, Precision p) const {
    dev->matmul(dy, weight_operand(*dev, w, dy, p), dx, linear_backward_input_args(rows, in, out, accumulate_dx, p));
  }
  void backward_weight(Operand x, Operand dy, int64_t rows, Precision p) const {
    dev->matmul(dy, x, w.grad(), linear_backward_weight_args(rows, in, out, p));
    if (has_bias) dev->colsum_accumulate(dy, b.grad(), rows, out);
  }
};

// Which normalisation: LayerNorm (mean and variance, weight and bias) or RMSNorm (the root mean
// square, weight only: Llama's).
enum class NormKind { layer, rms };

struct Norm {
  NormKind kind = NormKind::layer;
  int64_t dim = 0;
  float eps = 1e-5f;
  ParamRef w, b;          // b: LayerNorm only
  float* mean = nullptr;  // [slots, max rows]: one set of statistics per micro-batch in flight (LayerNorm)
  float* rstd = nullptr;
  int64_t max_rows = 0;
  ComputeDevice* dev = nullptr;

  Norm() = default;
  // rows_split: it sees only this slice's rows (sequence parallel), so its gradients are partial.
  Norm(ComputeDevice& d, Unit& u, const std::string& name, int64_t dim_, float eps_, NormKind kind_ = NormKind::layer,
       bool rows_split = false)
      : kind(kind_), dim(dim_), eps(eps_), dev(&d) {
    w = u.add(name + ".weight", {dim}, Init::ones);
    if (kind == NormKind::layer) b = u.add(name + ".bias", {dim}, Init::zeros);
    if (rows_split) {
      u.set_partial_grad(w);
      if (kind == NormKind::layer) u.set_partial_grad(b);
    }
  }
  // Its statistics for `slots` micro-batches of up to max_rows rows.
  void plan(Arena& arena, int64_t max_rows_, int slots) {
    max_rows = max_rows_;
    if (kind == NormKind::layer) mean = arena.f32(max_rows * slots);
    rstd = arena.f32(max_rows * slots);
  }
  // y [rows, dim]; kept in bf16, through `staging` [rows, dim] (write_activation).
  void forward(const float* x, ActBuffer y, int64_t rows, int slot = 0, float* staging = nullptr) const {
    const int64_t at = slot * max_rows;
    write_activation(*dev, y, staging, rows * dim, [&](float* out) {
      if (kind == NormKind::rms)
        dev->rmsnorm_forward(x, w.data(), out, rstd + at, rows, dim, eps);
      else
        dev->layernorm_forward(x, w.data(), b.data(), out, mean + at, rstd + at, rows, dim, eps);
    });
  }
  void backward(const float* x, const float* dy, float* dx, int64_t rows, bool accumulate_dx, int slot = 0) const {
    const int64_t at = slot * max_rows;
    if (kind == NormKind::rms)
      dev->rmsnorm_backward(dy, x, w.data(), rstd + at, dx, w.grad(), rows, dim, accumulate_dx);
    else
      dev->layernorm_backward(dy, x, w.data(), mean + at, rstd + at, dx, w.grad(), b.grad(), rows, dim, accumulate_dx);
  }
};

}  // namespace dtrain
