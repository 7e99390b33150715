// 2-D convolution and max pooling over NCHW activations (OIHW weights, as PyTorch stores them),
// forward and backward, through oneDNN's primitives (a cache of them by shape). The weight gradient
// is computed apart from the input gradient, as Linear's is, so zero-bubble pipeline schedules can
// run the two halves at different times.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/matmul.hpp"

namespace dtrain {

// x [N, C, H, W] * w [K, C, R, S] (+ bias [K]) → y [N, K, P, Q]; square stride and zero padding.
struct ConvShape {
  int64_t N = 0, C = 0, H = 0, W = 0;  // batch, input channels, input height and width
  int64_t K = 0, R = 0, S = 0;         // output channels, kernel height and width
  int64_t stride = 1, pad = 0;
  int64_t P() const { return (H + 2 * pad - R) / stride + 1; }  // output height
  int64_t Q() const { return (W + 2 * pad - S) / stride + 1; }  // output width
  int64_t input_floats() const { return N * C * H * W; }
  int64_t output_floats() const { return N * K * P() * Q(); }
  int64_t weight_floats() const { return K * C * R * S; }
  // Multiply-adds of the forward pass (each backward half costs as many).
  double macs() const { return double(N) * double(K) * double(P()) * double(Q()) * double(C * R * S); }
};

// Max pooling of x [N, C, H, W] over kernel × kernel windows every `stride` (no padding; windows
// that do not fit are left out, as PyTorch's default floor mode does) → y [N, C, P, Q].
struct PoolShape {
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t kernel = 2, stride = 2;
  int64_t P() const { return (H - kernel) / stride + 1; }
  int64_t Q() const { return (W - kernel) / stride + 1; }
  int64_t input_floats() const { return N * C * H * W; }
  int64_t output_floats() const { return N * C * P() * Q(); }
};

// y = conv(x, w) + bias (bias may be null). bf16: x and w are rounded to bf16 for the multiply,
// accumulation in f32.
void conv2d_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s, Precision p);
// dx = the input's gradient from dy (overwritten).
void conv2d_backward_input(const float* dy, const float* w, float* dx, const ConvShape& s, Precision p);
// dw += the weight's gradient, dbias += the bias's (dbias may be null).
void conv2d_backward_weight(const float* x, const float* dy, float* dw, float* dbias, const ConvShape& s, Precision p);

// Bytes of the record that max pooling keeps from forward for backward (where each maximum was).
size_t maxpool_workspace_bytes(const PoolShape& s);
// Host bytes the convolutions keep between calls (operands in oneDNN's layouts, a weight
// gradient before it is added, zeros for a missing bias; grow-only).
int64_t conv_scratch_bytes();
// y = the maximum of each window; `workspace` (maxpool_workspace_bytes) records where it was.
void maxpool_forward(const float* x, float* y, void* workspace, const PoolShape& s);
// dx = dy routed to each window's maximum (overwritten); x and y are forward's input and output.
void maxpool_backward(const float* x, const float* y, const float* dy, float* dx, const void* workspace,
                      const PoolShape& s);

}  // namespace dtrain
