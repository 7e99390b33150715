// `dtrain data prepare --tokenizer`: a corpus (text, JSONL, HDF5; gzip, zstd) tokenized by several workers
// into token shards, a document index and a manifest per split (docs/data-format.md), in bounded memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer/tokenizer.hpp"

namespace dtrain {

struct ShardPrepareOptions {
  std::string tokenizer;            // the tokenizer file (copied into out_dir)
  std::vector<std::string> inputs;  // files and folders
  std::string out_dir;
  std::string split;                // "train", "valid" or "test": every document there; "": by a seeded hash
  double valid_fraction = 0.01, test_fraction = 0.01;
  uint64_t seed = 1;
  std::string text_key = "text";    // JSONL
  std::string dataset;              // HDF5
  bool docs_by_line = false;        // text: a document per non-blank line (else per file)
  int workers = 0;                  // 0: one per usable CPU
  int64_t memory_mib = 256;         // cap on chunks of text in flight and their ids
  int64_t shard_tokens = 0;         // 0: about 1 GiB of ids per shard
  SpecialText special = SpecialText::text;
  bool eos = true, bos = false;
};

// The least --memory-mib: two chunks in flight.
inline constexpr int64_t kMinPrepareMemoryMib = 32;

struct ShardSplitReport {
  std::string split;
  int64_t documents = 0, tokens = 0, shards = 0, skipped = 0;  // skipped: encoded to no ids
};

struct ShardPrepareReport {
  std::vector<ShardSplitReport> splits;  // the splits written
  std::string tokenizer_kind;
  int64_t vocab_size = 0;
  int id_bytes = 0;
  int64_t files = 0;
  uint64_t input_bytes = 0;
  double seconds = 0;
  int workers = 0;
  int64_t budget_peak_bytes = 0;  // the most the chunks in flight held at once
};

ShardPrepareReport prepare_shards(const ShardPrepareOptions& options);

// Checks that out_dir may receive prepared shards: absent, empty, or an earlier shard preparation.
void check_shards_output(const std::string& out_dir);

// The split a document goes to without --split: 0 train, 1 valid, 2 test, by a hash of the seed and
// the document's index among all documents of the inputs.
int split_of_document(uint64_t doc, uint64_t seed, double valid_fraction, double test_fraction);

}  // namespace dtrain
