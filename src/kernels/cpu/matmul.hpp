// Matrix multiply through oneDNN, in f32 or bf16 compute (f32 accumulate and output).
// Row-major: C[M,N] (+)= op(A)[M,K] · op(B)[K,N] (+ bias[N]); op = transpose when asked.
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// Whether this CPU (and oneDNN build) runs bf16 products; where not, they compute in f32.
bool matmul_bf16_available();
// Host bytes the matmuls keep between calls (bf16 copies of their inputs, grow-only).
int64_t matmul_scratch_bytes();
// Whether a product of these arguments computes in bf16, from bf16 copies of its operands
// (M·K and K·N of them: what it keeps).
// A bf16 operand makes a product bf16 (its f32 operand is then copied to bf16, the bf16 one read as it
// is); where bf16 products are not available, bf16 operands are widened to f32 copies instead.
// bf16_products: whether they are (the planner asks for a CPU other than this one); without it, this
// CPU is asked, only for a bf16 product (bf16_products_for).
bool matmul_copies_to_bf16(const MatmulArgs& a, bool bf16_products);
bool matmul_copies_to_bf16(const MatmulArgs& a);
// Whether precision p asks for bf16 products and this CPU has them (probed only when asked; the first
// ask on a CPU without them says once that they compute in f32).
bool bf16_products_for(Precision p);

void matmul(Operand A, Operand B, float* C, const MatmulArgs& args);

// For a caller that reads the same f32 operand in several bf16 products (the classifier's weights,
// its logits' gradient): the operand rounded to bf16 once, into one of three grow-only buffers (a
// and b are those matmul() converts into: a later matmul() call may overwrite them), then the
// products of such copies. matmul_bf16 only where matmul_copies_to_bf16(args); the result is
// matmul()'s to the bit.
enum class Bf16Copy { a, b, c };
const uint16_t* matmul_bf16_copy(Bf16Copy which, const float* src, int64_t n);
// The buffer itself (at least n), for a caller that writes the bf16 copy as it computes the values.
uint16_t* matmul_bf16_buffer(Bf16Copy which, int64_t n);
// n elements of an operand as a bf16 product reads them: as stored, or copied into buffer `which`.
const uint16_t* bf16_operand(Operand x, Bf16Copy which, int64_t n);
void matmul_bf16(const uint16_t* A, const uint16_t* B, float* C, const MatmulArgs& args);

// A 4-D operand [d0, d1, rows, cols] given by element strides (any layout: a head's slice of a
// row-major activation, a transposed view, ...).
struct Strided4 {
  int64_t stride[4];
};

// Batched over (d0, d1): C[i,j] (+)= alpha * A[i,j] (M x K) · B[i,j] (K x N) for all i < d0, j < d1;
// with accumulate the product is added to C, else it replaces C. A and B both f32 (an f32 product) or
// both bf16 (a bf16 product, f32 accumulation and output; only where matmul_bf16_available()).
void matmul_batched(Operand A, Strided4 a, Operand B, Strided4 b, float* C, Strided4 c, int64_t d0, int64_t d1,
                    int64_t M, int64_t N, int64_t K, float alpha, bool accumulate = false);

// The three products of a Linear layer (linear_forward_args and the others of kernels/types.hpp) on the CPU.
inline void linear_forward(const float* x, const float* W, const float* b, float* y, int64_t rows,
                           int64_t in, int64_t out, Precision p) {
  matmul(x, W, y, linear_forward_args(rows, in, out, b, p));
}
inline void linear_backward_input(const float* dy, const float* W, float* dx, int64_t rows,
                                  int64_t in, int64_t out, bool accumulate, Precision p) {
  matmul(dy, W, dx, linear_backward_input_args(rows, in, out, accumulate, p));
}
inline void linear_backward_weight(const float* dy, const float* x, float* dW, int64_t rows,
                                   int64_t in, int64_t out, Precision p) {
  matmul(dy, x, dW, linear_backward_weight_args(rows, in, out, p));
}
// Both: dW += dyᵀ·x, then dx (+)= dy·W, the same bits as the two calls above; in bf16 dy is rounded
// once for both products (in the copy buffers a and b that matmul() uses: dy in a, x then W in b; x
// and W stored in bf16 are read as they are).
void linear_backward(Operand x, Operand dy, Operand W, float* dW, float* dx, int64_t rows, int64_t in,
                     int64_t out, bool accumulate_dx, Precision p);

}  // namespace dtrain
