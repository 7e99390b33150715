// Pointwise activations, forward and backward: ReLU and GELU (tanh approximation).
#pragma once
#include <cstdint>

namespace dtrain {

enum class Activation { relu, gelu };

// y = act(x) (in place allowed)
void activation_forward(Activation a, const float* x, float* y, int64_t n);
// dx = dy * act'(x), x the activation's input (dx may alias dy)
void activation_backward(Activation a, const float* x, const float* dy, float* dx, int64_t n);

}  // namespace dtrain
