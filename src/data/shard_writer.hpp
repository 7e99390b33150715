// Writes one split of a prepared folder into its staging folder (DIR/SPLIT.partial): token shards cut
// at exactly shard_tokens tokens, the document index, and, last, manifest.json.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/json.hpp"

namespace dtrain {

struct SplitWriterSettings {
  std::string split;        // "train", "valid" or "test"
  std::string dir;          // the staging folder, created here (it must not exist)
  int id_bytes = 4;         // 2 or 4
  uint32_t vocab_size = 0;  // every id is below it
  uint32_t tokenizer_crc32c = 0;
  int64_t shard_tokens = 0;
};

class SplitWriter {
 public:
  explicit SplitWriter(SplitWriterSettings settings);
  ~SplitWriter();
  SplitWriter(const SplitWriter&) = delete;
  SplitWriter& operator=(const SplitWriter&) = delete;

  // Appends ids of the current document (each below vocab_size).
  void append(std::span<const uint32_t> ids);
  // Ends the current document: its end offset goes into the index.
  void end_document();
  // A document that encoded to no ids: counted, not written.
  void skip_document() { ++skipped_; }

  int64_t tokens() const { return tokens_; }
  int64_t documents() const { return documents_; }
  int64_t skipped() const { return skipped_; }
  int64_t shards() const;

  // Closes the last shard and the index and writes manifest.json: format, version, split, then
  // context's "tokenizer", this split's sizes and files, then context's "inputs" and "options".
  // Returns the manifest.
  Json finish(const Json& context);

 private:
  class Output;
  void open_shard();
  void close_shard();
  void write_ids(std::span<const uint32_t> ids);

  SplitWriterSettings s_;
  std::unique_ptr<Output> shard_, index_;
  int64_t shard_fill_ = 0;      // tokens in the open shard
  uint32_t shard_crc_ = 0;      // CRC-32C so far, of a header that says the shard is full
  Json shard_list_ = Json::array();
  int64_t tokens_ = 0, documents_ = 0, skipped_ = 0;
  std::unique_ptr<uint16_t[]> narrow_;  // uint16 staging of ids for 2-byte shards
};

}  // namespace dtrain
