// The token-shard format of `dtrain data prepare --tokenizer` (docs/data-format.md): shard headers,
// the document index's header, the names of a prepared folder's files, and their checks.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

// shard-NNNNN.bin: this 64-byte little-endian header, then n_tokens ids of id_bytes each.
inline constexpr char kShardMagic[8] = {'D', 'T', 'R', 'S', 'H', 'A', 'R', 'D'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr int64_t kShardHeaderBytes = 64;

struct ShardHeader {
  char magic[8];
  uint32_t version;
  uint32_t id_bytes;          // 2 (uint16 ids) or 4 (uint32 ids)
  uint32_t vocab_size;
  uint32_t tokenizer_crc32c;  // CRC-32C of the tokenizer file's bytes
  uint64_t n_tokens;
  uint64_t first_token;       // global offset of this shard's first token in its split
  uint8_t padding[24];        // zero
};
static_assert(sizeof(ShardHeader) == kShardHeaderBytes);

// documents.idx: "DTRDOCS1", uint64 count, then count + 1 uint64 global token offsets.
inline constexpr char kDocumentsMagic[8] = {'D', 'T', 'R', 'D', 'O', 'C', 'S', '1'};
inline constexpr int64_t kDocumentsHeaderBytes = 16;

inline constexpr const char* kShardsFormat = "dtrain-shards";  // manifest.json's "format"
inline constexpr int64_t kShardsManifestVersion = 1;
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kDocumentsFile = "documents.idx";
inline constexpr const char* kShardSplits[3] = {"train", "valid", "test"};

// A header with every field set (magic, version, zero padding).
ShardHeader make_shard_header(uint32_t id_bytes, uint32_t vocab_size, uint32_t tokenizer_crc32c, uint64_t n_tokens,
                              uint64_t first_token);
// Error naming `path` unless the magic, version, id width and padding are those of a shard.
void check_shard_header(const ShardHeader& h, const std::string& path);

// "shard-00012.bin"
std::string shard_file_name(int64_t index);
// 2 when every id of a vocabulary this size fits in uint16, else 4.
int shard_id_bytes(int64_t vocab_size);
// The default --shard-tokens: about 1 GiB of ids (2^29 uint16 ids, 2^28 uint32 ids).
int64_t default_shard_tokens(int id_bytes);
// The name a tokenizer's copy takes in a prepared folder: "vocab.txt" (word), "tokenizer.json" (bpe),
// "tokenizer.model" (sentencepiece, tiktoken).
std::string tokenizer_copy_name(const std::string& kind);

}  // namespace dtrain
