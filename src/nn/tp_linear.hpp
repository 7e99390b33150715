// Linear layers at the edges of tensor-parallel regions, with the regions' collectives run beside
// their matmuls (Megatron's overlap): a column-parallel forward consumes its input's rows as they
// are gathered, a row-parallel forward sums its output in row chunks while the next chunk is
// computed, a column-parallel backward sums its input gradient while the weight gradient is
// computed. In one process each is the plain Linear call. LinearBackward is how a unit's Linear
// layers run their backward under a whole or split (zero-bubble) backward.
#pragma once

#include "nn/context.hpp"
#include "nn/layers.hpp"
#include "nn/tp_regions.hpp"
#include "nn/weight_grads.hpp"

namespace dtrain {

// y [rows, l.out] = l(x) for all `rows`, x given as this slice's rows `x_local` (all of them but
// under sequence parallel, where the others are gathered into `gathered` [rows, l.in], in x's type).
// relu: y = ReLU(l(x)) (Linear::forward's).
void column_parallel_forward(TpRegions& regions, const Linear& l, Operand x_local, void* gathered, float* y,
                             int64_t rows, Precision p, bool relu = false);

// The slices' sum of l(x) [rows, l.out] (x [rows, l.in]: all rows), computed into `partial` and
// summed in place, or reduce-scattered into `local` (this slice's rows) under sequence parallel.
// Returns the sum.
float* row_parallel_forward(TpRegions& regions, const Linear& l, Operand x, float* partial, float* local,
                            int64_t rows, Precision p);

// A unit's Linear backward for the running backward call: part all computes both halves now;
// part input computes the input half and keeps the weight half in `store` for the call with part
// weight.
struct LinearBackward {
  BackwardPart part = BackwardPart::all;
  WeightGradStore* store = nullptr;
  // dx (+)= the input gradient (accumulate), and the weight gradient now or kept.
  // dy may be stored in bf16 (a gradient kept for products).
  void operator()(const Linear& l, Operand x, bool x_lives, Operand dy, float* dx, int64_t rows,
                  bool accumulate, Precision p) const;
  // The weight half alone, now or kept.
  void weight(const Linear& l, Operand x, bool x_lives, Operand dy, int64_t rows, Precision p) const;
};

// A column-parallel Linear's backward from its output gradient dy [rows, l.out] (all rows) and
// input x_local (this slice's rows; under sequence parallel the others are gathered into
// `gathered` [rows, l.in]): its weight gradient, and du (+)= the input gradient summed over the
// slices (this slice's rows). With several slices the input gradient's partial goes to `partial`
// [rows, l.in] and its sum runs while the weight half is computed; under sequence parallel the sum
// is reduce-scattered into `spare` (this slice's rows), which must alias nothing the weight half
// reads. In one process: grads() of the whole.
void column_parallel_backward(TpRegions& regions, const TpSlice& slice, const LinearBackward& grads, const Linear& l,
                              Operand x_local, void* gathered, Operand dy, float* partial, float* spare,
                              float* du, bool accumulate, int64_t rows, Precision p);

}  // namespace dtrain
