// Reductions whose result does not depend on the thread count (fixed blocking, fixed order),
// and small elementwise helpers.
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// out[c] += sum over rows r of x[r, c]  (bias gradients); x f32 or bf16 (a gradient kept so), summed in f32.
void colsum_accumulate(Operand x, float* out, int64_t rows, int64_t cols);
// Sum of x[0..n) in double, blocked so that the result is the same for any thread count.
double sum_deterministic(const float* x, int64_t n);
// Sum of squares, same guarantee (gradient norms).
double sumsq_deterministic(const float* x, int64_t n);

}  // namespace dtrain
