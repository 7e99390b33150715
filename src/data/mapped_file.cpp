// Read-only file mappings registered for SIGBUS, and file checksums (see mapped_file.hpp).
#include "data/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "core/crc32c.hpp"
#include "core/descriptors.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/limits.hpp"

namespace dtrain {

MappedFile::MappedFile(const std::string& path, const std::string& what, const std::string& fix) : path_(path) {
  const int fd = open_regular_file(path, what);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error("cannot read " + what + " " + path + " (" + std::strerror(err) + ")" + fix);
  }
  bytes_ = size_t(st.st_size);
  if (bytes_ == 0) {
    ::close(fd);
    return;
  }
  void* m = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (m == MAP_FAILED) {
    bytes_ = 0;
    throw Error("cannot map " + what + " " + path + " (" + std::strerror(err) + "): check free memory and the file");
  }
  map_ = m;
  mapping_ = register_mapping(m, bytes_, what + " " + path + " was truncated or replaced while this job read it (" +
                                             std::to_string(bytes_) + " bytes when it started): leave prepared data "
                                             "alone while a job uses it; prepare into a new folder instead");
}

void MappedFile::expect_random_reads() const {
  if (map_ != nullptr) ::madvise(map_, bytes_, MADV_RANDOM);  // advice only: a failure changes nothing
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      mapping_(std::exchange(o.mapping_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    mapping_ = std::exchange(o.mapping_, -1);
  }
  return *this;
}

void MappedFile::release() noexcept {
  unregister_mapping(std::exchange(mapping_, -1));
  if (map_) ::munmap(map_, bytes_);
  map_ = nullptr;
  bytes_ = 0;
}

FileChecksum checksum_file(const std::string& path, const std::string& what) {
  const int fd = open_regular_file(path, what);
  std::vector<char> buf(size_t(1) << 20);
  FileChecksum sum;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw Error("cannot read " + what + " " + path + " (" + std::strerror(err) + "): check the file and its disk");
    }
    if (n == 0) break;
    sum.crc32c = crc32c(buf.data(), size_t(n), sum.crc32c);
    sum.bytes += n;
  }
  ::close(fd);
  return sum;
}

}  // namespace dtrain
