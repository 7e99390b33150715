// Context parallel's split of sequences (see sequence_split.hpp).
#include "parallel/cp/sequence_split.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace dtrain {

SequenceShard sequence_shard(int64_t T, int cp, int rank) {
  if (T % (2 * int64_t(cp)) != 0)
    throw ConfigError("parallel.cp = " + std::to_string(cp) + " splits each sequence into 2·cp = " +
                      std::to_string(2 * cp) + " chunks, and model.seq_len = " + std::to_string(T) +
                      " does not divide by it: choose a sequence length that is a multiple of " + std::to_string(2 * cp));
  SequenceShard s;
  s.T = T;
  s.chunk = T / (2 * cp);
  s.first = int64_t(rank) * s.chunk;
  s.second = int64_t(2 * cp - 1 - rank) * s.chunk;
  return s;
}

namespace {
// Copies a sample's values at the shard's two runs of positions side by side.
void cut(const int32_t* whole, int32_t* part, const SequenceShard& s) {
  std::copy(whole + s.first, whole + s.first + s.chunk, part);
  std::copy(whole + s.second, whole + s.second + s.chunk, part + s.chunk);
}
}  // namespace

BatchView ShardedBatch::of(const BatchView& whole, const SequenceShard& s) {
  DT_ASSERT(whole.shape.input == InputKind::tokens && whole.shape.inputs == s.T && whole.shape.targets == s.T);
  const int64_t local = 2 * s.chunk, n = whole.samples * local;
  if (int64_t(tokens_.size()) < n) {
    tokens_.resize(size_t(n));
    targets_.resize(size_t(n));
  }
  for (int64_t b = 0; b < whole.samples; ++b) {
    cut(whole.tokens() + b * s.T, tokens_.data() + b * local, s);
    cut(whole.targets + b * s.T, targets_.data() + b * local, s);
  }
  BatchView v = whole;
  v.shape.inputs = local;
  v.shape.targets = local;
  v.inputs = tokens_.data();
  v.targets = targets_.data();
  return v;
}

}  // namespace dtrain
