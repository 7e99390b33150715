// Where tensor-parallel slices of the model meet (DESIGN §3.7): blocks and the head call these at
// the edges of their cut matmuls; in one process they do nothing. src/parallel/tp implements them
// over the mesh's tensor-parallel group. Model code stays free of ranks and collectives.
#pragma once
#include <cstdint>

#include "kernels/cpu/cross_entropy.hpp"

namespace dtrain {

class TpRegions : public RowStatsCombiner {
 public:
  // Before a column-parallel matmul (and in backward, after a row-parallel one's output gradient):
  // all `rows` rows of an activation of which this slice holds its share (sequence parallel: an
  // all-gather into `full`, which is returned); otherwise `local` is whole already and is returned.
  virtual const float* all_rows(const float* local, float* /*full*/, int64_t /*rows*/, int64_t /*cols*/) {
    return local;
  }
  // After a row-parallel matmul (and in backward, the input gradient of a column-parallel one): the
  // slices' partial sums [rows, cols] added up; returned is this slice's rows of the total (sequence
  // parallel: a reduce-scatter into `local`) or all of them (an all-reduce in place: `partial`).
  virtual float* sum_partials(float* partial, float* /*local*/, int64_t /*rows*/, int64_t /*cols*/) { return partial; }
  // Columns of every vocabulary slice side by side: `local` [rows, cols] → `full` [rows, full_cols],
  // the first full_cols of the slices' cols·slices (the rest pad the last slices). Host memory
  // (generation's logits; not in the step loop).
  virtual void all_columns(const float* local, float* full, int64_t rows, int64_t cols, int64_t full_cols);
  // The vocabulary-parallel loss's row statistics (RowStatsCombiner): nothing to combine with.
  void max(float*, int64_t) override {}
  void sum(float*, int64_t) override {}
};

// The one-process regions (every call is the identity).
TpRegions& no_tp_regions();

}  // namespace dtrain
