// Shard headers and the names of a prepared folder's files (see shard_format.hpp).
#include "data/shard_format.hpp"

#include <bit>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"

namespace dtrain {

static_assert(std::endian::native == std::endian::little, "dtrain token shards assume a little-endian host");

ShardHeader make_shard_header(uint32_t id_bytes, uint32_t vocab_size, uint32_t tokenizer_crc32c, uint64_t n_tokens,
                              uint64_t first_token) {
  ShardHeader h{};
  std::memcpy(h.magic, kShardMagic, sizeof h.magic);
  h.version = kShardVersion;
  h.id_bytes = id_bytes;
  h.vocab_size = vocab_size;
  h.tokenizer_crc32c = tokenizer_crc32c;
  h.n_tokens = n_tokens;
  h.first_token = first_token;
  return h;
}

void check_shard_header(const ShardHeader& h, const std::string& path) {
  const std::string fix = ": prepare it again (dtrain data prepare --tokenizer …)";
  require(std::memcmp(h.magic, kShardMagic, sizeof h.magic) == 0, "token shard " + path + " is not a dtrain shard "
                                                                   "(bad magic)" + fix);
  require(h.version == kShardVersion, "token shard " + path + " has version " + std::to_string(h.version) +
                                          " but this dtrain reads version " + std::to_string(kShardVersion) + fix);
  require(h.id_bytes == 2 || h.id_bytes == 4,
          "token shard " + path + " has an id width of " + std::to_string(h.id_bytes) + " bytes (not 2 or 4)" + fix);
  for (uint8_t b : h.padding) require(b == 0, "token shard " + path + " has a damaged header (padding not zero)" + fix);
}

std::string shard_file_name(int64_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05lld.bin", static_cast<long long>(index));
  return name;
}

int shard_id_bytes(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

int64_t default_shard_tokens(int id_bytes) { return id_bytes == 2 ? int64_t(1) << 29 : int64_t(1) << 28; }

std::string tokenizer_copy_name(const std::string& kind) {
  if (kind == "word") return "vocab.txt";
  if (kind == "bpe") return "tokenizer.json";
  return "tokenizer.model";
}

}  // namespace dtrain
