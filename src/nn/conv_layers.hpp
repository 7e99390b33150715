// The image layers, run on a ComputeDevice: Conv2d ([out, in, kh, kw] weights and a bias, as
// PyTorch's Conv2d) and MaxPool2d (keeping, per activation slot, where each maximum was). Rows are
// samples: a [N, C, H, W] activation is N rows of C·H·W floats, so dropout, flattening and the
// linear layers after read it as they are.
#pragma once
#include <string>

#include "kernels/device.hpp"
#include "nn/unit.hpp"

namespace dtrain {

struct Conv2d {
  ConvShape shape;  // N is set per call
  ParamRef w, b;
  ComputeDevice* dev = nullptr;

  Conv2d() = default;
  // Weights and bias drawn like PyTorch's defaults: uniform within ±1/√(in · kernel²).
  Conv2d(ComputeDevice& d, Unit& u, const std::string& name, int64_t in_channels, int64_t out_channels,
         int64_t kernel, int64_t height, int64_t width, int64_t padding)
      : dev(&d) {
    shape.C = in_channels;
    shape.H = height;
    shape.W = width;
    shape.K = out_channels;
    shape.R = shape.S = kernel;
    shape.pad = padding;
    const int64_t fan_in = in_channels * kernel * kernel;
    w = u.add(name + ".weight", {out_channels, in_channels, kernel, kernel}, Init::fan_in_uniform, fan_in);
    b = u.add(name + ".bias", {out_channels}, Init::fan_in_uniform, fan_in);
  }
  ConvShape batch(int64_t n) const {
    ConvShape s = shape;
    s.N = n;
    return s;
  }
  int64_t in_floats() const { return shape.C * shape.H * shape.W; }         // per sample
  int64_t out_floats() const { return shape.K * shape.P() * shape.Q(); }    // per sample
  void forward(const float* x, float* y, int64_t rows, Precision p) const {
    dev->conv2d_forward(x, w.data(), b.data(), y, batch(rows), p);
  }
  // The two halves of backward, which zero-bubble pipeline schedules run apart (I, then W).
  void backward_input(const float* dy, float* dx, int64_t rows, Precision p) const {
    dev->conv2d_backward_input(dy, w.data(), dx, batch(rows), p);
  }
  // x: f32 (a convolution's input is never kept in bf16; the Operand is WeightGradStore's)
  void backward_weight(Operand x, Operand dy, int64_t rows, Precision p) const {
    dev->conv2d_backward_weight(x.f32(), dy.f32(), w.grad(), b.grad(), batch(rows), p);
  }
};

struct MaxPool2d {
  PoolShape shape;  // N is set per call
  void* workspace = nullptr;  // [slots] records of where the maxima were
  size_t workspace_bytes = 0;   // per slot, for the largest batch
  ComputeDevice* dev = nullptr;

  MaxPool2d() = default;
  MaxPool2d(ComputeDevice& d, int64_t channels, int64_t height, int64_t width, int64_t kernel) : dev(&d) {
    shape.C = channels;
    shape.H = height;
    shape.W = width;
    shape.kernel = shape.stride = kernel;
  }
  PoolShape batch(int64_t n) const {
    PoolShape s = shape;
    s.N = n;
    return s;
  }
  int64_t out_floats() const { return shape.C * shape.P() * shape.Q(); }  // per sample
  // Its records for `slots` micro-batches of up to max_rows samples.
  void plan(Arena& arena, int64_t max_rows, int slots) {
    workspace_bytes = (dev->maxpool_workspace_bytes(batch(max_rows)) + 63) / 64 * 64;
    workspace = arena.f32(int64_t(workspace_bytes / 4) * slots);
  }
  void forward(const float* x, float* y, int64_t rows, int slot) const {
    dev->maxpool_forward(x, y, record(slot), batch(rows));
  }
  void backward(const float* x, const float* y, const float* dy, float* dx, int64_t rows, int slot) const {
    dev->maxpool_backward(x, y, dy, dx, record(slot), batch(rows));
  }

 private:
  void* record(int slot) const { return static_cast<char*>(workspace) + workspace_bytes * size_t(slot); }
};

}  // namespace dtrain
