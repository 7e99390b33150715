// Crash-safe file output: write to a temporary, fsync, rename over the target, fsync the directory,
// so a reader sees either the old file or the complete new one.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "core/input_file.hpp"  // read_file: the reading side

namespace dtrain {

// One piece of a file written by write_file_atomic (pieces are written back to back).
struct ConstBuffer {
  const void* data;
  size_t size;
};

// A file written piece by piece into `path.tmp.<pid>.<n>` and made `path` by commit(): fsync,
// rename, fsync of the directory. Destroyed without commit() (an error, an exception), the
// temporary is removed and `path` is left as it was. Errors name the cause and the fix.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void commit();

 private:
  void flush_buffer();
  [[noreturn]] void fail(const char* step, int err);
  std::string path_, tmp_;
  int fd_ = -1;
  std::string buffer_;  // small writes are gathered here
};

// Whole-file versions of AtomicFile.
void write_file_atomic(const std::string& path, const void* data, size_t n);
void write_file_atomic(const std::string& path, std::string_view bytes);
void write_file_atomic(const std::string& path, std::span<const ConstBuffer> parts);

// Makes the fully written directory `staged_dir` become `final_dir` without final_dir ever being
// half-written: readers see the old complete directory, the new complete one, or (only with the
// fallback below, between two renames) none. Uses renameat2(RENAME_EXCHANGE) where the filesystem
// supports it (a true atomic swap); otherwise renames the old final_dir to `final_dir.old.<pid>`,
// renames staged_dir to final_dir, then removes the old one. Parent directories are fsynced. Both
// paths must be on the same filesystem.
void replace_dir_atomic(const std::string& staged_dir, const std::string& final_dir);

// fsync a directory so renames/creations inside it are durable (best effort where unsupported).
void fsync_dir(const std::string& dir);

// "a/b///" -> "a/b" (but "/" stays "/"): a folder given with a trailing slash (tab completion) is the
// folder itself, so that its parent and sibling names come out right.
std::string strip_slashes(std::string path);

}  // namespace dtrain
