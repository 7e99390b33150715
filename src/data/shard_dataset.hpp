// Training samples over a sharded split (TokenShards): windows of seq_len tokens with the targets
// shifted by one, starting every `stride` tokens of the split's one stream of documents (each ended by
// EOS), or, with document boundaries, only within a document (shorter documents give no window).
#pragma once
#include <cstdint>
#include <vector>

#include "data/dataset.hpp"
#include "data/token_shards.hpp"

namespace dtrain {

class ShardWindowDataset : public Dataset {
 public:
  // The shards must outlive the dataset. Error when no window fits.
  ShardWindowDataset(const TokenShards& shards, int64_t seq_len, const WindowOptions& options);

  int64_t size() const override { return size_; }
  SampleShape shape() const override { return {InputKind::tokens, seq_len_, seq_len_}; }
  void get(int64_t i, void* inputs, int32_t* targets) const override;
  // The split's token where window i starts.
  int64_t window_start(int64_t i) const;

 private:
  const TokenShards& shards_;
  int64_t seq_len_, stride_, size_ = 0;
  // With document boundaries: windows before document d (window_prefix_[d]) and each document's start.
  std::vector<int64_t> window_prefix_, doc_start_;
};

}  // namespace dtrain
