// JSONL metrics writer (see jsonl.hpp).
#include "metrics/jsonl.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace dtrain {

void JsonlWriter::Close::operator()(std::FILE* f) const { std::fclose(f); }

JsonlWriter::JsonlWriter(const std::string& path) : path_(path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    require(!ec, "cannot create directory " + parent.string() + " for " + path + ": " +
                     ec.message() + "; choose a writable location");
  }
  file_.reset(std::fopen(path.c_str(), "ab"));
  if (!file_) {
    int err = errno;
    throw Error("cannot open metrics log " + path + ": " + std::strerror(err) +
                "; choose a writable location");
  }
}

JsonlWriter::~JsonlWriter() = default;

int64_t JsonlWriter::bytes() const {
  struct stat st {};
  return ::fstat(::fileno(file_.get()), &st) == 0 ? int64_t(st.st_size) : -1;
}

void JsonlWriter::write(const Json& obj) {
  DT_ASSERT(file_ && obj.is_object());
  line_ = obj.dump();
  line_ += '\n';
  if (std::fwrite(line_.data(), 1, line_.size(), file_.get()) != line_.size() ||
      std::fflush(file_.get()) != 0) {
    throw Error("cannot write metrics log " + path_ + ": " + std::strerror(errno) +
                "; free disk space or choose another location");
  }
}

}  // namespace dtrain
