// What a forward/backward pass needs to know besides the data: the batch shape, training or not,
// the precision, and the keys of its dropout masks. Knows nothing of ranks.
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

struct StepContext {
  int64_t B = 0, T = 0;       // this pass: B samples of T tokens
  bool training = false;      // dropout on, gradients computed
  float dropout = 0.0f;
  uint64_t seed = 0;
  uint32_t step = 0;
  int64_t sample_offset = 0;  // global index of row 0's sample within the global batch
  int64_t sample_stride = 1;  // row b's sample is sample_offset + b * sample_stride (data parallel)
  float loss_scale = 0.0f;    // gradient of the loss w.r.t. each row loss (1 / global rows)
  Precision precision = Precision::f32;
  // Context parallel: T is this pass's share of each sample's positions, and these are where they
  // stand in the whole sequence (inactive: the pass holds whole samples).
  SequenceShard sequence;

  int64_t rows() const { return B * T; }
  int64_t seq_len() const { return sequence.global_length(T); }  // the whole sequence's length
  DropoutSpec drop(uint32_t unit, uint32_t site) const {
    DropoutSpec s;
    if (!training || dropout <= 0.0f) return s;
    s.p = dropout;
    s.seed = seed;
    s.step = step;
    s.unit = unit;
    s.site = site;
    s.sample_offset = sample_offset;
    s.sample_stride = sample_stride;
    return s;
  }
  // The mask of a [rows, cols] activation's tile of rows from row `row_offset` on (sequence
  // parallel: this slice's rows), all columns.
  DropoutSpec drop_rows(uint32_t unit, uint32_t site, int64_t row_offset) const {
    DropoutSpec s = drop(unit, site);
    s.rows_per_sample = T;
    s.row_offset = row_offset;
    s.sequence = sequence;
    return s;
  }
};

// What a backward computes: everything, or (zero-bubble pipeline schedules) the input gradient
// first and the weight gradients later, from what the first half kept.
enum class BackwardPart { all, input, weight };

}  // namespace dtrain
