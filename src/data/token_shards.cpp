// The reader of a prepared split: manifest, mapped shards and document index, all checked against
// each other when opened; copy() across shard boundaries; verify() by checksums.
#include "data/token_shards.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "data/shard_format.hpp"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

const std::string kPrepareAgain = ": prepare it again (dtrain data prepare --tokenizer …)";

// A file name the manifest lists: a plain name inside the split folder, never a path out of it.
std::string listed_file(const Json& entry, const std::string& source) {
  const std::string name = json_get<std::string>(entry, "file", source);
  require(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
          source + " names the file \"" + name + "\", not a file of its folder" + kPrepareAgain);
  return name;
}

uint32_t listed_crc(const Json& j, const std::string& key, const std::string& source) {
  const int64_t v = json_get<int64_t>(j, key, source);
  require(v >= 0 && v <= int64_t(UINT32_MAX), source + ": " + key + " " + std::to_string(v) +
                                                  " is not a CRC-32C" + kPrepareAgain);
  return uint32_t(v);
}

// Error unless the file's size is `expected` (what the manifest and header say it holds).
void require_size(const std::string& what, const std::string& path, int64_t bytes, int64_t expected) {
  if (bytes < expected)
    throw Error(what + " " + path + " is truncated: " + std::to_string(bytes) + " bytes, the manifest says " +
                std::to_string(expected) + kPrepareAgain);
  if (bytes > expected)
    throw Error(what + " " + path + " has " + std::to_string(bytes) + " bytes, more than the " +
                std::to_string(expected) + " its manifest says" + kPrepareAgain);
}

// Error unless the file's checksum and size are the manifest's.
void verify_file(const std::string& what, const std::string& path, int64_t bytes, uint32_t crc) {
  const FileChecksum sum = checksum_file(path, what);
  require_size(what, path, sum.bytes, bytes);
  require(sum.crc32c == crc, what + " " + path + " was altered after prepare (CRC-32C " + std::to_string(sum.crc32c) +
                                 ", the manifest says " + std::to_string(crc) + ")" + kPrepareAgain);
}

}  // namespace

TokenShards::TokenShards(const std::string& split_dir) : dir_(strip_slashes(split_dir)) {
  read_manifest();
  open_shards();
  open_documents();
}

std::string TokenShards::source() const { return (fs::path(dir_) / kManifestFile).string(); }

void TokenShards::read_manifest() {
  const std::string path = source();
  std::error_code ec;
  require(fs::exists(path, ec), "folder " + dir_ + " is not a prepared split (no " + kManifestFile +
                                    "; an interrupted prepare leaves SPLIT.partial, which is never loaded): "
                                    "prepare it with dtrain data prepare --tokenizer …");
  manifest_ = parse_json(read_file(path, kMaxSmallFileBytes, "shard manifest"), path);
  require(manifest_.is_object() && manifest_.value("format", "") == kShardsFormat,
          path + " is not a dtrain-shards manifest" + kPrepareAgain);
  const int64_t version = json_get<int64_t>(manifest_, "version", path);
  require(version == kShardsManifestVersion, path + " has version " + std::to_string(version) +
                                                 " but this dtrain reads version " +
                                                 std::to_string(kShardsManifestVersion) + kPrepareAgain);
  id_bytes_ = int(json_get<int64_t>(manifest_, "id_bytes", path));
  vocab_size_ = json_get<int64_t>(manifest_, "tokenizer.vocab_size", path);
  tokenizer_crc_ = listed_crc(manifest_, "tokenizer.crc32c", path);
  tokens_ = json_get<int64_t>(manifest_, "tokens", path);
  documents_ = json_get<int64_t>(manifest_, "documents", path);
  require((id_bytes_ == 2 || id_bytes_ == 4) && vocab_size_ > 0 && vocab_size_ <= int64_t(UINT32_MAX) &&
              tokens_ >= 0 && documents_ >= 0 && (id_bytes_ == 4 || vocab_size_ <= 65536),
          path + " holds impossible values (id_bytes, vocab_size, tokens, documents)" + kPrepareAgain);
}

void TokenShards::open_shards() {
  const std::string path = source();
  const Json& list = json_at(manifest_, "shards", path);
  require(list.is_array(), path + ": shards is not a list" + kPrepareAgain);
  int64_t next = 0;
  for (const Json& entry : list) {
    Shard s;
    s.file = listed_file(entry, path);
    s.tokens = json_get<int64_t>(entry, "tokens", path);
    s.bytes = json_get<int64_t>(entry, "bytes", path);
    s.crc32c = listed_crc(entry, "crc32c", path);
    s.first = next;
    const std::string file = (fs::path(dir_) / s.file).string();
    require(s.tokens > 0 && s.bytes == kShardHeaderBytes + s.tokens * id_bytes_,
            path + ": the sizes it lists for " + s.file + " do not agree" + kPrepareAgain);
    s.map = MappedFile(file, "token shard", kPrepareAgain);
    s.map.expect_random_reads();  // windows are read in a shuffled order
    require_size("token shard", file, int64_t(s.map.size()), s.bytes);
    ShardHeader h;
    std::memcpy(&h, s.map.data(), sizeof h);
    check_shard_header(h, file);
    require(h.id_bytes == uint32_t(id_bytes_) && h.vocab_size == uint64_t(vocab_size_) &&
                h.tokenizer_crc32c == tokenizer_crc_,
            "token shard " + file + " was written with another tokenizer or id width than its manifest says" +
                kPrepareAgain);
    require(h.n_tokens == uint64_t(s.tokens) && h.first_token == uint64_t(next),
            "token shard " + file + " holds tokens " + std::to_string(h.first_token) + " to " +
                std::to_string(h.first_token + h.n_tokens) + " but the manifest places it at " +
                std::to_string(next) + " to " + std::to_string(next + s.tokens) + kPrepareAgain);
    next += s.tokens;
    shard_starts_.push_back(s.first);
    shards_.push_back(std::move(s));
  }
  require(next == tokens_, path + " lists shards of " + std::to_string(next) + " tokens in all but says " +
                               std::to_string(tokens_) + kPrepareAgain);
}

void TokenShards::open_documents() {
  const std::string path = source();
  const Json& entry = json_at(manifest_, "documents_file", path);
  const std::string file = (fs::path(dir_) / listed_file(entry, path)).string();
  const int64_t bytes = json_get<int64_t>(entry, "bytes", path);
  require(bytes == kDocumentsHeaderBytes + 8 * (documents_ + 1),
          path + ": the size it lists for the document index does not agree with its documents" + kPrepareAgain);
  documents_map_ = MappedFile(file, "document index", kPrepareAgain);
  require_size("document index", file, int64_t(documents_map_.size()), bytes);
  const char* p = documents_map_.data();
  uint64_t count = 0, first = 0, last = 0;
  std::memcpy(&count, p + 8, 8);
  std::memcpy(&first, p + kDocumentsHeaderBytes, 8);
  std::memcpy(&last, p + kDocumentsHeaderBytes + 8 * documents_, 8);
  require(std::memcmp(p, kDocumentsMagic, 8) == 0 && count == uint64_t(documents_) && first == 0 &&
              last == uint64_t(tokens_),
          "document index " + file + " does not match its manifest (magic, count or end)" + kPrepareAgain);
}

std::pair<int64_t, int64_t> TokenShards::document_range(int64_t i) const {
  require(i >= 0 && i < documents_, "document " + std::to_string(i) + " is outside the " +
                                        std::to_string(documents_) + " documents of " + dir_);
  int64_t r[2];
  std::memcpy(r, documents_map_.data() + kDocumentsHeaderBytes + 8 * i, sizeof r);
  require(0 <= r[0] && r[0] <= r[1] && r[1] <= tokens_,
          "document index " + documents_map_.path() + " is damaged at document " + std::to_string(i) + kPrepareAgain);
  return {r[0], r[1]};
}

void TokenShards::copy(int64_t global_start, int64_t count, int32_t* out) const {
  require(global_start >= 0 && count >= 0 && count <= tokens_ - global_start,
          "tokens " + std::to_string(global_start) + " to " + std::to_string(global_start + count) +
              " are outside the " + std::to_string(tokens_) + " tokens of " + dir_);
  size_t s = size_t(std::upper_bound(shard_starts_.begin(), shard_starts_.end(), global_start) -
                    shard_starts_.begin()) - 1;
  while (count > 0) {
    const Shard& shard = shards_[s];
    const int64_t at = global_start - shard.first;
    const int64_t n = std::min(count, shard.tokens - at);
    const char* ids = shard.map.data() + kShardHeaderBytes + at * id_bytes_;
    if (id_bytes_ == 2) {
      for (int64_t k = 0; k < n; ++k) {
        uint16_t v;
        std::memcpy(&v, ids + 2 * k, 2);
        out[k] = int32_t(v);
      }
    } else {
      std::memcpy(out, ids, size_t(n) * 4);
    }
    out += n;
    global_start += n;
    count -= n;
    ++s;
  }
}

void TokenShards::verify() const {
  for (const Shard& s : shards_) verify_file("token shard", (fs::path(dir_) / s.file).string(), s.bytes, s.crc32c);
  const Json& docs = json_at(manifest_, "documents_file", source());
  verify_file("document index", documents_map_.path(), json_get<int64_t>(docs, "bytes", source()),
              listed_crc(docs, "crc32c", source()));
  const std::string name = listed_file(json_at(manifest_, "tokenizer", source()), source());
  const std::string tokenizer = (fs::path(dir_).parent_path() / name).string();
  std::error_code ec;
  require(fs::exists(tokenizer, ec), "tokenizer copy " + tokenizer + " is missing" + kPrepareAgain);
  const FileChecksum sum = checksum_file(tokenizer, "tokenizer copy");
  require(sum.crc32c == tokenizer_crc_, "tokenizer copy " + tokenizer + " is not the tokenizer " + dir_ +
                                            " was prepared with (CRC-32C " + std::to_string(sum.crc32c) +
                                            ", the manifest says " + std::to_string(tokenizer_crc_) + ")" +
                                            kPrepareAgain);
}

}  // namespace dtrain
