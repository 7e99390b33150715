// Pointwise activations, forward and backward: ReLU and GELU (tanh approximation).
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// y = act(x) (in place allowed in f32); x may be stored in bf16 (read as its values).
void activation_forward(Activation a, Operand x, float* y, int64_t n);
// dx = dy * act'(x), x the activation's input, f32 or bf16; dx f32 (may alias dy) or bf16, rounded
// from the f32 result (a gradient kept for products: it overlaps neither x nor dy).
void activation_backward(Activation a, Operand x, const float* dy, ActBuffer dx, int64_t n);

// ReLU backward from its (possibly dropped-out and scaled) output y: dx = dy * scale where y > 0.
// With y = relu(x) * mask * scale this is exactly the gradient of dropout(relu(x)) (dx may alias dy).
// y may be stored in bf16 (the values rounded: the same signs, but for f32 values below bf16's least);
// dx as activation_backward's.
void relu_backward_from_output(Operand y, const float* dy, ActBuffer dx, int64_t n, float scale);

}  // namespace dtrain
