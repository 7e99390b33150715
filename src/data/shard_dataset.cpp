// ShardWindowDataset (see shard_dataset.hpp).
#include "data/shard_dataset.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace dtrain {

ShardWindowDataset::ShardWindowDataset(const TokenShards& shards, int64_t seq_len, const WindowOptions& o)
    : shards_(shards), seq_len_(seq_len), stride_(o.stride > 0 ? o.stride : seq_len) {
  require(seq_len >= 1, "seq_len must be at least 1: set model.seq_len to a positive value");
  auto windows_in = [&](int64_t tokens) { return tokens >= seq_len + 1 ? (tokens - seq_len - 1) / stride_ + 1 : 0; };
  if (!o.document_boundaries) {
    size_ = windows_in(shards.tokens());
  } else {
    window_prefix_.reserve(size_t(shards.documents()) + 1);
    doc_start_.reserve(size_t(shards.documents()));
    window_prefix_.push_back(0);
    for (int64_t d = 0; d < shards.documents(); ++d) {
      const auto [first, end] = shards.document_range(d);
      doc_start_.push_back(first);
      window_prefix_.push_back(window_prefix_.back() + windows_in(end - first));
    }
    size_ = window_prefix_.back();
  }
  const std::string need = "seq_len+1 = " + std::to_string(seq_len + 1) + " tokens";
  require(size_ > 0 || o.document_boundaries, "data " + shards.dir() + " holds " + std::to_string(shards.tokens()) +
                                                  " tokens, fewer than " + need + ": use a smaller model.seq_len or more data");
  require(size_ > 0, "data " + shards.dir() + " has no document of " + need + " or more (data.document_boundaries = "
                     "true): use a smaller model.seq_len, or let windows cross documents");
}

int64_t ShardWindowDataset::window_start(int64_t i) const {
  DT_ASSERT(i >= 0 && i < size_);
  if (window_prefix_.empty()) return i * stride_;
  const auto after = std::upper_bound(window_prefix_.begin(), window_prefix_.end(), i);
  const size_t d = size_t(after - window_prefix_.begin()) - 1;
  return doc_start_[d] + (i - window_prefix_[d]) * stride_;
}

void ShardWindowDataset::get(int64_t i, void* inputs, int32_t* targets) const {
  const int64_t start = window_start(i);
  shards_.copy(start, seq_len_, static_cast<int32_t*>(inputs));
  shards_.copy(start + 1, seq_len_, targets);
}

}  // namespace dtrain
