// A corpus file's bytes as a stream, decompressed when its first bytes say gzip or zstd: the reader
// side of `dtrain data prepare --tokenizer`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dtrain {

enum class Compression { none, gzip, zstd };

// What a file's magic bytes say: gzip (1f 8b), zstd (28 b5 2f fd) or none.
Compression detect_compression(const std::string& path);
// Whether the file starts with the HDF5 signature (\x89HDF\r\n\x1a\n).
bool has_hdf5_signature(const std::string& path);

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Up to n bytes of the (decompressed) content; 0 at its end. Error naming the file when it cannot
  // be read or its compressed data is damaged or truncated.
  virtual size_t read(char* buf, size_t n) = 0;
  // Bytes of the file itself consumed so far (compressed bytes for gzip and zstd): for progress.
  virtual uint64_t consumed() const = 0;
};

std::unique_ptr<ByteStream> open_byte_stream(const std::string& path, Compression compression);

}  // namespace dtrain
