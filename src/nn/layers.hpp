// The two parameterised building blocks: Linear ([out, in] weights as in PyTorch, optional bias)
// and LayerNorm (which keeps its own per-row statistics for backward), run on a ComputeDevice.
#pragma once
#include <string>

#include "kernels/device.hpp"
#include "nn/unit.hpp"

namespace dtrain {

struct Linear {
  int64_t in = 0, out = 0;
  ParamRef w, b;
  bool has_bias = false;
  ComputeDevice* dev = nullptr;

  Linear() = default;
  Linear(ComputeDevice& d, Unit& u, const std::string& name, int64_t in_, int64_t out_, bool bias, Init bias_init)
      : in(in_), out(out_), has_bias(bias), dev(&d) {
    w = u.add(name + ".weight", {out, in}, Init::xavier);
    if (bias) b = u.add(name + ".bias", {out}, bias_init, in);
  }
  void forward(const float* x, float* y, int64_t rows, Precision p) const {
    dev->matmul(x, w.data(), y, linear_forward_args(rows, in, out, has_bias ? b.data() : nullptr, p));
  }
  // Accumulates dW, db; writes (or adds to) dx unless dx is null.
  void backward(const float* x, const float* dy, float* dx, int64_t rows, bool accumulate_dx,
                Precision p) const {
    dev->matmul(dy, x, w.grad(), linear_backward_weight_args(rows, in, out, p));
    if (has_bias) dev->colsum_accumulate(dy, b.grad(), rows, out);
    if (dx) dev->matmul(dy, w.data(), dx, linear_backward_input_args(rows, in, out, accumulate_dx, p));
  }
};

struct LayerNorm {
  int64_t dim = 0;
  float eps = 1e-5f;
  ParamRef w, b;
  float* mean = nullptr;  // [max rows]
  float* rstd = nullptr;
  ComputeDevice* dev = nullptr;

  LayerNorm() = default;
  LayerNorm(ComputeDevice& d, Unit& u, const std::string& name, int64_t dim_, float eps_, Arena& arena,
            int64_t max_rows)
      : dim(dim_), eps(eps_), dev(&d) {
    w = u.add(name + ".weight", {dim}, Init::ones);
    b = u.add(name + ".bias", {dim}, Init::zeros);
    mean = arena.f32(max_rows);
    rstd = arena.f32(max_rows);
  }
  void forward(const float* x, float* y, int64_t rows) const {
    dev->layernorm_forward(x, w.data(), b.data(), y, mean, rstd, rows, dim, eps);
  }
  void backward(const float* x, const float* dy, float* dx, int64_t rows, bool accumulate_dx) const {
    dev->layernorm_backward(dy, x, w.data(), mean, rstd, dx, w.grad(), b.grad(), rows, dim, accumulate_dx);
  }
};

}  // namespace dtrain
