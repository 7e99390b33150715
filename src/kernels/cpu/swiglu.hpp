// SwiGLU, the gated activation of the Llama feed-forward: silu of one half of each row times the other
// half, forward and backward.
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// a: [rows, 2f], each row [gate | up], f32 or bf16; y: [rows, f] = silu(gate) * up, silu(g) = g *
// sigmoid(g) (stored in bf16: rounded to nearest even).
void swiglu_forward(Operand a, ActBuffer y, int64_t rows, int64_t f);
// From dy [rows, f]: da [rows, 2f] = [dy * up * silu'(gate) | dy * silu(gate)] (written, not accumulated).
// da may be a itself in f32 (each gate and up pair is read before it is overwritten); in bf16 (a
// gradient kept for products: rounded from the f32 result) it overlaps neither a nor dy.
void swiglu_backward(Operand a, const float* dy, ActBuffer da, int64_t rows, int64_t f);

}  // namespace dtrain
