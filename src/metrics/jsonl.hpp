// JsonlWriter: a metrics log with one compact JSON object per line, flushed after every line so
// `tail -f` and scripts see each record at once.
#pragma once
#include <cstdio>
#include <memory>
#include <string>

#include "core/json.hpp"

namespace dtrain {

class JsonlWriter {
 public:
  // Opens `path` for appending (a resumed run continues its log), creating parent directories.
  explicit JsonlWriter(const std::string& path);
  ~JsonlWriter();
  JsonlWriter(JsonlWriter&&) noexcept = default;
  JsonlWriter& operator=(JsonlWriter&&) noexcept = default;

  // Writes obj.dump() and a newline, then flushes. obj must be an object.
  void write(const Json& obj);
  const std::string& path() const { return path_; }
  int64_t bytes() const;  // the log's size (every line is flushed)

 private:
  struct Close {
    void operator()(std::FILE* f) const;
  };
  std::string path_;
  std::unique_ptr<std::FILE, Close> file_;
  std::string line_;  // reused buffer
};

}  // namespace dtrain
