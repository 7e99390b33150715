// Matrix multiply through oneDNN, in f32 or bf16 compute (f32 accumulate and output).
// Row-major: C[M,N] (+)= op(A)[M,K] · op(B)[K,N] (+ bias[N]); op = transpose when asked.
#pragma once
#include <cstdint>

namespace dtrain {

enum class Precision { f32, bf16 };

// Whether this CPU runs bf16 matmuls natively (avx512_bf16 or AMX); bf16 still works without, slower.
bool cpu_has_native_bf16();

struct MatmulArgs {
  int64_t M, N, K;
  bool trans_a = false;  // A stored [K, M]
  bool trans_b = false;  // B stored [N, K]
  bool accumulate = false;  // C += result, else C = result
  const float* bias = nullptr;  // [N], added to every row (not with accumulate)
  Precision precision = Precision::f32;
};

void matmul(const float* A, const float* B, float* C, const MatmulArgs& args);

// A 4-D operand [d0, d1, rows, cols] given by element strides (any layout: a head's slice of a
// row-major activation, a transposed view, ...).
struct Strided4 {
  int64_t stride[4];
};

// Batched over (d0, d1), f32: C[i,j] = alpha * A[i,j] (M x K) · B[i,j] (K x N) for all i < d0, j < d1.
void matmul_batched(const float* A, Strided4 a, const float* B, Strided4 b, float* C, Strided4 c, int64_t d0,
                    int64_t d1, int64_t M, int64_t N, int64_t K, float alpha);

// Convenience for Linear layers with weights stored [out, in] as in PyTorch.
// y[rows, out] = x[rows, in] · W^T + b
inline void linear_forward(const float* x, const float* W, const float* b, float* y, int64_t rows,
                           int64_t in, int64_t out, Precision p) {
  matmul(x, W, y, {rows, out, in, false, true, false, b, p});
}
// dx[rows, in] (+)= dy · W ; dW[out, in] += dy^T · x  (bias gradient: colsum_accumulate)
inline void linear_backward_input(const float* dy, const float* W, float* dx, int64_t rows,
                                  int64_t in, int64_t out, bool accumulate, Precision p) {
  matmul(dy, W, dx, {rows, in, out, false, false, accumulate, nullptr, p});
}
inline void linear_backward_weight(const float* dy, const float* x, float* dW, int64_t rows,
                                   int64_t in, int64_t out, Precision p) {
  matmul(dy, x, dW, {out, in, rows, true, false, true, nullptr, p});
}

}  // namespace dtrain
