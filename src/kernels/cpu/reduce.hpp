// Reductions whose result does not depend on the thread count (fixed blocking, fixed order),
// and small elementwise helpers.
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// out[c] += sum over rows r of x[r, c]  (bias gradients); x f32 or bf16 (a gradient kept so), summed in f32.
void colsum_accumulate(Operand x, float* out, int64_t rows, int64_t cols);
// colsum_accumulate over rows that come a few at a time (a fused kernel's pieces), to its bit over
// them all: add() the rows in order, then add_to(out). part and total: cols floats each, zero at the
// start (and again after add_to).
struct ColumnSums {
  float* part;
  float* total;
  int64_t cols;
  int64_t rows = 0;  // added since the last add_to
  void add(const float* x, int64_t n);
  void add_to(float* out);
};
// Sum of x[0..n) in double, blocked so that the result is the same for any thread count.
double sum_deterministic(const float* x, int64_t n);
// Sum of squares, same guarantee (gradient norms).
double sumsq_deterministic(const float* x, int64_t n);

}  // namespace dtrain
