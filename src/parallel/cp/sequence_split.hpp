// Context parallel's split of every sequence (DESIGN §5): 2·cp chunks, rank i of the
// context-parallel group holding chunks i and 2·cp−1−i, so that under a causal mask every rank's
// queries see as many keys (without it the last rank would do cp times the first's work). A batch
// of whole samples becomes this rank's share of each: its tokens and targets at those positions.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch.hpp"
#include "kernels/types.hpp"

namespace dtrain {

// The positions rank `rank` of `cp` holds of a sequence of T. ConfigError naming the fix when 2·cp
// does not divide T.
SequenceShard sequence_shard(int64_t T, int cp, int rank);

// A batch's samples cut to a shard's positions, in buffers it keeps (grown once to the largest).
class ShardedBatch {
 public:
  BatchView of(const BatchView& whole, const SequenceShard& s);
  size_t bytes() const { return (tokens_.capacity() + targets_.capacity()) * sizeof(int32_t); }

 private:
  std::vector<int32_t> tokens_, targets_;
};

}  // namespace dtrain
