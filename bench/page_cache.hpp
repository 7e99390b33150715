// The page cache of a folder's files, for bench/loader_throughput.cpp: evict them (posix_fadvise
// DONTNEED: this corpus only, nothing else of the machine's cache), read them in, and the share resident.
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace bench_cache {

inline std::vector<std::string> regular_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path().string());
  return out;
}

inline int open_or_throw(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  dtrain::require(fd >= 0, "cannot open " + path);
  return fd;
}

// Drops the clean cached pages of every file in dir (a written file must have been fsynced: dirty pages stay).
inline void evict(const std::string& dir) {
  for (const std::string& path : regular_files(dir)) {
    const int fd = open_or_throw(path);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// Reads every file in dir once, so that its pages are cached.
inline void load(const std::string& dir) {
  std::vector<char> buf(size_t(4) << 20);
  for (const std::string& path : regular_files(dir)) {
    const int fd = open_or_throw(path);
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
    ::close(fd);
  }
}

// The share of the bytes of dir's files that are in the page cache (mincore).
inline double resident_share(const std::string& dir) {
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  int64_t pages = 0, resident = 0;
  for (const std::string& path : regular_files(dir)) {
    const int fd = open_or_throw(path);
    const off_t bytes = ::lseek(fd, 0, SEEK_END);
    void* map = bytes > 0 ? ::mmap(nullptr, size_t(bytes), PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd);
    if (map == MAP_FAILED) continue;
    std::vector<unsigned char> in((size_t(bytes) + size_t(page) - 1) / size_t(page));
    if (::mincore(map, size_t(bytes), in.data()) == 0)
      for (unsigned char c : in) resident += c & 1;
    pages += int64_t(in.size());
    ::munmap(map, size_t(bytes));
  }
  return pages > 0 ? double(resident) / double(pages) : 0.0;
}

}  // namespace bench_cache
