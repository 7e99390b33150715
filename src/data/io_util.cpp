// Small file helpers shared by the data layer: atomic writes (temp file + rename) and line reading.
#include "data/io_util.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace dtrain::data_io {

namespace {
std::atomic<uint64_t> g_tmp_counter{0};

[[noreturn]] void write_failed(const std::string& path, int err) {
  throw Error("cannot write " + path + " (" + std::strerror(err) +
              "): check free disk space and write permission, or choose another output folder");
}
}  // namespace

AtomicWriter::AtomicWriter(const std::string& path) : path_(path) {
  tmp_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(g_tmp_counter++);
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) write_failed(path_, errno);
}

AtomicWriter::~AtomicWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void AtomicWriter::put(const void* bytes, size_t n) {
  DT_ASSERT(f_ != nullptr);
  if (n == 0) return;
  if (std::fwrite(bytes, 1, n, f_) != n) write_failed(path_, errno);
}

void AtomicWriter::commit() {
  DT_ASSERT(f_ != nullptr);
  std::FILE* f = f_;
  f_ = nullptr;
  bool ok = std::fflush(f) == 0;
  int err = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp_.c_str());
    write_failed(path_, err);
  }
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    std::remove(tmp_.c_str());
    throw Error("cannot rename " + tmp_ + " to " + path_ + " (" + ec.message() +
                "): check write permission on the output folder");
  }
}

void for_each_line(const std::string& path, const std::function<void(std::string_view)>& fn) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("cannot read " + path + ": it is a folder, not a text file; pass a file or a folder of text files");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot read " + path + " (" + std::strerror(errno) + "): check that the file exists and is readable");
  }
  std::string line;
  while (std::getline(in, line)) {
    std::string_view v(line);
    if (!v.empty() && v.back() == '\r') v.remove_suffix(1);
    fn(v);
  }
  if (in.bad()) {
    throw Error("error while reading " + path + " (" + std::strerror(errno) +
                "): check the file and the disk it is on");
  }
}

bool is_blank(std::string_view line) {
  for (char c : line)
    if (!(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')) return false;
  return true;
}

}  // namespace dtrain::data_io
