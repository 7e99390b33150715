// The two parameterised building blocks: Linear ([out, in] weights as in PyTorch, optional bias)
// and LayerNorm (which keeps its own per-row statistics for backward).
#pragma once
#include <string>

#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/reduce.hpp"
#include "nn/unit.hpp"

namespace dtrain {

struct Linear {
  int64_t in = 0, out = 0;
  ParamRef w, b;
  bool has_bias = false;

  Linear() = default;
  Linear(Unit& u, const std::string& name, int64_t in_, int64_t out_, bool bias, Init bias_init)
      : in(in_), out(out_), has_bias(bias) {
    w = u.add(name + ".weight", {out, in}, Init::xavier);
    if (bias) b = u.add(name + ".bias", {out}, bias_init, in);
  }
  void forward(const float* x, float* y, int64_t rows, Precision p) const {
    linear_forward(x, w.data(), has_bias ? b.data() : nullptr, y, rows, in, out, p);
  }
  // Accumulates dW, db; writes (or adds to) dx unless dx is null.
  void backward(const float* x, const float* dy, float* dx, int64_t rows, bool accumulate_dx,
                Precision p) const {
    linear_backward_weight(dy, x, w.grad(), rows, in, out, p);
    if (has_bias) colsum_accumulate(dy, b.grad(), rows, out);
    if (dx) linear_backward_input(dy, w.data(), dx, rows, in, out, accumulate_dx, p);
  }
};

struct LayerNorm {
  int64_t dim = 0;
  float eps = 1e-5f;
  ParamRef w, b;
  float* mean = nullptr;  // [max rows]
  float* rstd = nullptr;

  LayerNorm() = default;
  LayerNorm(Unit& u, const std::string& name, int64_t dim_, float eps_, Arena& arena, int64_t max_rows)
      : dim(dim_), eps(eps_) {
    w = u.add(name + ".weight", {dim}, Init::ones);
    b = u.add(name + ".bias", {dim}, Init::zeros);
    mean = arena.f32(max_rows);
    rstd = arena.f32(max_rows);
  }
  void forward(const float* x, float* y, int64_t rows) const {
    layernorm_forward(x, w.data(), b.data(), y, mean, rstd, rows, dim, eps);
  }
  void backward(const float* x, const float* dy, float* dx, int64_t rows, bool accumulate_dx) const {
    layernorm_backward(dy, x, w.data(), mean, rstd, dx, w.grad(), b.grad(), rows, dim, accumulate_dx);
  }
};

}  // namespace dtrain
