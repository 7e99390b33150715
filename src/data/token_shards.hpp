// One split of a folder prepared by `dtrain data prepare --tokenizer` (docs/data-format.md), opened
// for reading: its manifest, every shard mapped read-only and checked against it, the document index.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/json.hpp"
#include "data/mapped_file.hpp"

namespace dtrain {

class TokenShards {
 public:
  // Opens SPLIT_DIR (e.g. DIR/train): reads manifest.json, maps each shard and documents.idx, and
  // checks their sizes and headers against the manifest (id width, vocabulary size, tokenizer
  // checksum, token counts, contiguous first_token). Error naming the file and the fix otherwise.
  explicit TokenShards(const std::string& split_dir);

  const std::string& dir() const { return dir_; }
  int64_t tokens() const { return tokens_; }
  int64_t documents() const { return documents_; }
  int64_t shard_count() const { return int64_t(shards_.size()); }
  int id_bytes() const { return id_bytes_; }
  int64_t vocab_size() const { return vocab_size_; }
  uint32_t tokenizer_crc32c() const { return tokenizer_crc_; }
  const Json& manifest() const { return manifest_; }

  // Document i's tokens: [first, second) of the split (its trailing EOS included). Error for an index
  // outside [0, documents()) or a damaged index entry.
  std::pair<int64_t, int64_t> document_range(int64_t i) const;
  // Copies tokens [global_start, global_start + count) into out, widening uint16 ids; crosses shard
  // boundaries. The range must lie within [0, tokens()).
  void copy(int64_t global_start, int64_t count, int32_t* out) const;
  // Every file's CRC-32C and size against the manifest (the shards, documents.idx, and the tokenizer
  // copy beside the split folder when it is there). Error naming the first file that differs.
  void verify() const;

 private:
  struct Shard {
    std::string file;
    int64_t first = 0, tokens = 0, bytes = 0;
    uint32_t crc32c = 0;
    MappedFile map;
  };
  void read_manifest();
  void open_shards();
  void open_documents();
  std::string source() const;

  std::string dir_;
  Json manifest_;
  std::vector<Shard> shards_;
  std::vector<int64_t> shard_starts_;  // first token of each shard, for copy's search
  MappedFile documents_map_;
  int64_t tokens_ = 0, documents_ = 0, vocab_size_ = 0;
  int id_bytes_ = 0;
  uint32_t tokenizer_crc_ = 0;
};

}  // namespace dtrain
