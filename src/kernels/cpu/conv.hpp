// 2-D convolution and max pooling over NCHW activations or the device's layout of them (ImageLayout;
// OIHW weights, as PyTorch stores them),
// forward and backward, through oneDNN's primitives (a cache of them by shape). The weight gradient
// is computed apart from the input gradient, as Linear's is, so zero-bubble pipeline schedules can
// run the two halves at different times.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// ConvShape and PoolShape: kernels/types.hpp.

// y = conv(x, w) + bias (bias may be null), ReLU'd when s.relu. bf16: x and w are rounded to bf16
// for the multiply, accumulation in f32. x, dx in s.x_layout and y, dy in s.y_layout (ImageLayout).
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
// y = the maximum of each window; `workspace` (maxpool_workspace_bytes) records where it was. x, dx
// in s.x_layout; y, dy in NCHW.
void maxpool_forward(const float* x, float* y, void* workspace, const PoolShape& s);
// dx = dy routed to each window's maximum (overwritten); x and y are forward's input and output.
void maxpool_backward(const float* x, const float* y, const float* dy, float* dx, const void* workspace,
                      const PoolShape& s);

}  // namespace dtrain
