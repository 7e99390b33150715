// Linear layers at the edges of tensor-parallel regions, with the regions' collectives run beside
// their matmuls (Megatron's overlap): a column-parallel forward consumes its input's rows as they
// are gathered, a row-parallel forward sums its output in row chunks while the next chunk is
// computed, a column-parallel backward sums its input gradient while the weight gradient is
// computed. In one process each is the plain Linear call.
#pragma once
#include <functional>

#include "nn/layers.hpp"
#include "nn/tp_regions.hpp"

namespace dtrain {

// y [rows, l.out] = l(x) for all `rows`, x given as this slice's rows `x_local` (all of them but
// under sequence parallel, where the others are gathered into `gathered` [rows, l.in]).
void column_parallel_forward(TpRegions& regions, const Linear& l, const float* x_local, float* gathered, float* y,
                             int64_t rows, Precision p);

// The slices' sum of l(x) [rows, l.out] (x [rows, l.in]: all rows), computed into `partial` and
// summed in place, or reduce-scattered into `local` (this slice's rows) under sequence parallel.
// Returns the sum.
float* row_parallel_forward(TpRegions& regions, const Linear& l, const float* x, float* partial, float* local,
                            int64_t rows, Precision p);

// A column-parallel Linear's backward: its input gradient's partial [rows, l.in] into `partial`,
// its sum begun, then `weight_half` (the weight gradient, run now or kept for later), then
// du (+)= the sum (this slice's rows). Under sequence parallel the sum is reduce-scattered into
// `spare` (this slice's rows), which must not alias anything weight_half reads.
void column_parallel_backward_input(TpRegions& regions, const Linear& l, const float* dy, float* partial, float* spare,
                                    float* du, bool accumulate, int64_t rows, int64_t local_rows, Precision p,
                                    const std::function<void()>& weight_half);

}  // namespace dtrain
