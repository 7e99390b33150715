// Where tensor-parallel slices of the model meet (DESIGN §3.7): blocks and the head call these at
// the edges of their cut matmuls; in one process they do nothing. src/parallel/tp implements them
// over the mesh's tensor-parallel group. Model code stays free of ranks and collectives.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>

#include "kernels/types.hpp"

namespace dtrain {

// A sum of partial results under way (TpRegions::sum_partials_begin): finish() waits for it and
// returns what sum_partials would have.
class PendingSum {
 public:
  explicit PendingSum(float* done) : result_(done) {}
  explicit PendingSum(std::function<float*()> wait) : wait_(std::move(wait)) {}
  float* finish() {
    if (wait_) result_ = std::exchange(wait_, nullptr)();
    return result_;
  }

 private:
  float* result_ = nullptr;
  std::function<float*()> wait_;
};

class TpRegions : public RowStatsCombiner {
 public:
  using RowChunk = std::function<void(int64_t r0, int64_t n)>;
  using RowsReady = std::function<void(int64_t r0, int64_t n, Operand x)>;

  // Before a column-parallel matmul (and in backward, after a row-parallel one's output gradient):
  // all `rows` rows of an activation of which this slice holds its share (sequence parallel: an
  // all-gather into `full`, which is returned); otherwise `local` is whole already and is returned.
  // An activation kept in bf16 is gathered in bf16 (`full` holds rows·cols of its type).
  virtual Operand all_rows(Operand local, void* /*full*/, int64_t /*rows*/, int64_t /*cols*/) { return local; }
  // The same for f32 (an output gradient).
  const float* all_rows(const float* local, float* full, int64_t rows, int64_t cols) {
    return all_rows(Operand(local), static_cast<void*>(full), rows, cols).f32();
  }
  // After a row-parallel matmul (and in backward, the input gradient of a column-parallel one): the
  // slices' partial sums [rows, cols] added up; returned is this slice's rows of the total (sequence
  // parallel: a reduce-scatter into `local`) or all of them (an all-reduce in place: `partial`).
  virtual float* sum_partials(float* partial, float* /*local*/, int64_t /*rows*/, int64_t /*cols*/) { return partial; }
  // As sum_partials, begun now and finished by the handle's finish(), so that the caller computes
  // something that does not need the sum meanwhile (a weight gradient). Neither `partial` nor
  // `local` may be touched before finish().
  virtual PendingSum sum_partials_begin(float* partial, float* /*local*/, int64_t /*rows*/, int64_t /*cols*/) {
    return PendingSum(partial);
  }
  // A row-parallel matmul computed in row chunks, and its sum: produce(r0, n) writes rows
  // [r0, r0 + n) of `partial`; a chunk's sum is under way while the next is computed. Returns what
  // sum_partials returns.
  virtual float* sum_partials_of(float* partial, float* /*local*/, int64_t rows, int64_t /*cols*/,
                                 const RowChunk& produce) {
    produce(0, rows);
    return partial;
  }
  // A column-parallel matmul's input rows as they arrive: consume(r0, n, x) reads rows [r0, r0 + n)
  // of all `rows` (x points at row r0). Under sequence parallel this slice's own rows come first,
  // while the other slices' are gathered into `full`; otherwise `local` holds them all.
  virtual void all_rows_then(Operand local, void* /*full*/, int64_t rows, int64_t /*cols*/,
                             const RowsReady& consume) {
    consume(0, rows, local);
  }
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
