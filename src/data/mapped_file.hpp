// A whole file mapped read-only, registered with the SIGBUS handler (core/limits.hpp) so that a file
// truncated or replaced under a reader stops the job with one line naming it; and a file's CRC-32C.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dtrain {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path` (a regular file; an empty one maps to nothing). `what` names it in errors ("token
  // shard"), `fix` ends them.
  MappedFile(const std::string& path, const std::string& what, const std::string& fix);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const char* data() const { return static_cast<const char*>(map_); }
  size_t size() const { return bytes_; }
  // Tells the kernel the pages will be read in no order (a token shard under shuffled windows): a
  // fault then reads the page, not the read-ahead window around it (8 MiB on some disks).
  void expect_random_reads() const;

 private:
  void release() noexcept;
  std::string path_;
  void* map_ = nullptr;
  size_t bytes_ = 0;
  int mapping_ = -1;  // handle of register_mapping
};

// The CRC-32C and the size of a file's bytes, read through a small buffer (not mapped: a file that
// shrinks meanwhile ends the read, it does not fault). Error naming `what` and the file.
struct FileChecksum {
  uint32_t crc32c = 0;
  int64_t bytes = 0;
};
FileChecksum checksum_file(const std::string& path, const std::string& what);

}  // namespace dtrain
