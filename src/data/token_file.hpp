// Binary token files (one per split): a 32-byte header, then uint32 little-endian token ids,
// memory-mapped read-only for training.
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace dtrain {

// Layout: "DTRTOK01", uint32 version (2), uint32 vocab_size, uint64 n_tokens, uint32 vocab_crc32c
// (the CRC-32C of the vocab.txt the ids index), uint32 reserved (0), then n_tokens uint32 ids. All
// little-endian. Version 1 (no vocabulary checksum: those 8 bytes are 0) is still read.
inline constexpr char kTokenFileMagic[8] = {'D', 'T', 'R', 'T', 'O', 'K', '0', '1'};
inline constexpr uint32_t kTokenFileVersion = 2;
inline constexpr int64_t kTokenFileHeaderBytes = 32;

// Writes a token file through a temporary file and a rename. Every id must be < vocab_size;
// vocab_crc32c: the checksum of the vocabulary file's bytes.
void write_token_file(const std::string& path, uint32_t vocab_size, std::span<const uint32_t> ids,
                      uint32_t vocab_crc32c);

class TokenFile {
 public:
  // Maps `path` read-only and validates the header and the file length (not the ids).
  explicit TokenFile(const std::string& path);
  ~TokenFile();
  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return n_tokens_; }
  const uint32_t* data() const { return data_; }
  uint32_t vocab_size() const { return vocab_size_; }
  // The checksum of the vocabulary the ids index; false for a version-1 file, which has none.
  bool has_vocab_crc32c() const { return has_vocab_crc_; }
  uint32_t vocab_crc32c() const { return vocab_crc_; }
  uint32_t operator[](int64_t i) const { return data_[i]; }

  // Reads every id; throws Error naming the first one >= vocab_size().
  void check_ids() const;

 private:
  void release() noexcept;

  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  int mapping_ = -1;  // registered for the SIGBUS handler (core/limits.hpp)
  const uint32_t* data_ = nullptr;
  int64_t n_tokens_ = 0;
  uint32_t vocab_size_ = 0;
  bool has_vocab_crc_ = false;
  uint32_t vocab_crc_ = 0;
};

}  // namespace dtrain
