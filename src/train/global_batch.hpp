// train.global_batch dealt out over the data-parallel ranks: the per-rank micro-batch and the
// micro-steps that make the same global batch at any data-parallel size (elastic restarts); and the
// mean over those ranks of what each measured of its share (a loss).
#pragma once
#include <cstdint>
#include <string>

#include "comm/world.hpp"

namespace dtrain {

struct BatchSplit {
  int64_t micro_batch = 1;  // samples per data-parallel rank and micro-step
  int64_t accum = 1;        // micro-steps per optimizer step
  int64_t global(int dp) const { return micro_batch * dp * accum; }
  // "global batch 32 = 2 data-parallel ranks × 4 samples × 4 micro-steps"
  std::string describe(int dp) const;
};

// The split of `global` samples per optimizer step over `dp` ranks of at most `max_per_rank` samples
// each per micro-step: the fewest micro-steps a with micro_batch × dp × a = global. Error naming the
// numbers and the fix when dp does not divide global.
BatchSplit split_global_batch(int64_t global, int dp, int64_t max_per_rank);

// The run's split: train.global_batch's when it is set (> 0), else train.batch_size ×
// train.grad_accum as given.
BatchSplit run_batch_split(int64_t global_batch, int64_t batch_size, int64_t grad_accum, int dp);

// The mean over the dp data-parallel ranks of a per-rank value (v itself when dp = 1). Collective:
// every rank of the world calls it at the same point.
double mean_over_data_parallel(World& world, int dp, double v);

// An elastic job (MIN..MAX nodes of `workers_per_node`, `ranks_per_copy` = tp × pp ranks per model
// copy) keeps `global` only at sizes whose data-parallel size divides it: Error at the start, naming
// the first size that would not and a global batch that every size keeps, rather than a job that
// stops when it shrinks there hours later. Sizes tp × pp does not divide are left to the mesh.
void require_split_at_every_size(int64_t global, int min_nodes, int max_nodes, int workers_per_node,
                                 int ranks_per_copy);

// An elastic job holds whole model copies (tp × cp × pp ranks each) at every size it may come to, MIN to
// MAX nodes: Error at the start naming the first size that cannot, rather than a job that stops
// (or restarts in vain) when a loss shrinks it there.
void require_copies_at_every_size(int min_nodes, int max_nodes, int workers_per_node, int tp, int pp, int cp = 1);

}  // namespace dtrain
