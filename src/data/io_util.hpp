// Small file helpers shared by the data layer: atomic writes (temp file + rename) and line reading.
#pragma once
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace dtrain::data_io {

// Writes `path` through a temporary file in the same folder, then renames it into place, so a
// reader never sees a half-written file. Emit the content with put(), then call commit().
class AtomicWriter {
 public:
  explicit AtomicWriter(const std::string& path);
  ~AtomicWriter();  // removes the temporary file when commit() was not reached
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  void put(const void* bytes, size_t n);
  void put(std::string_view s) { put(s.data(), s.size()); }
  void commit();  // flush, close and rename over the target

 private:
  std::string path_;
  std::string tmp_;
  std::FILE* f_ = nullptr;
};

// Calls fn(line) for every line of `path` (without the newline, trailing '\r' removed).
// Throws Error naming the file when it cannot be opened or read.
void for_each_line(const std::string& path, const std::function<void(std::string_view)>& fn);

// True when the line holds only ASCII whitespace.
bool is_blank(std::string_view line);

}  // namespace dtrain::data_io
