// Binary token files: writer (temp file + rename) and a validated read-only memory map.
#include "data/token_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "core/atomic_file.hpp"
#include "core/descriptors.hpp"
#include "core/limits.hpp"
#include "data/io_util.hpp"

namespace dtrain {

// The ids are used in place from the mapping, which needs a little-endian host.
static_assert(std::endian::native == std::endian::little, "dtrain token files assume a little-endian host");

namespace {

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t vocab_size;
  uint64_t n_tokens;
  uint32_t vocab_crc32c;  // version 2 (version 1: 0)
  uint32_t reserved;
};
static_assert(sizeof(Header) == kTokenFileHeaderBytes);

std::string prepare_again() { return "; run `dtrain data prepare` again"; }

}  // namespace

void write_token_file(const std::string& path, uint32_t vocab_size, std::span<const uint32_t> ids,
                      uint32_t vocab_crc32c) {
  DT_ASSERT(vocab_size > 0);
  for (uint32_t id : ids) DT_ASSERT(id < vocab_size);
  Header h{};
  std::memcpy(h.magic, kTokenFileMagic, sizeof(h.magic));
  h.version = kTokenFileVersion;
  h.vocab_size = vocab_size;
  h.n_tokens = ids.size();
  h.vocab_crc32c = vocab_crc32c;
  h.reserved = 0;
  AtomicFile w(path);
  w.write(&h, sizeof(h));
  w.write(ids.data(), ids.size_bytes());
  w.commit();
}

TokenFile::TokenFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a pipe: refused below, not waited on
  if (fd < 0) {
    const int err = errno;
    throw_if_out_of_descriptors(err, "cannot open token file " + path);
    throw Error("cannot open token file " + path + " (" + std::strerror(err) +
                "): run `dtrain data prepare` to create it, or fix data.dir");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("token file " + path + " is not a regular file: point data.dir at the output of `dtrain data prepare`");
  }
  const uint64_t bytes = uint64_t(st.st_size);
  if (bytes < sizeof(Header)) {
    ::close(fd);
    throw Error("token file " + path + " is truncated: " + std::to_string(bytes) +
                " bytes, less than its 32-byte header" + prepare_again());
  }
  void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (m == MAP_FAILED)
    throw Error("cannot map token file " + path + " (" + std::strerror(err) + "): check free memory and the file");
  map_ = m;
  map_bytes_ = bytes;

  Header h{};
  std::memcpy(&h, m, sizeof(h));
  if (std::memcmp(h.magic, kTokenFileMagic, sizeof(h.magic)) != 0) {
    release();
    throw Error(path + " is not a dtrain token file (bad magic)" + prepare_again());
  }
  if (h.version != 1 && h.version != kTokenFileVersion) {
    release();
    throw Error("token file " + path + " has version " + std::to_string(h.version) + " but this dtrain reads versions 1 "
                "to " + std::to_string(kTokenFileVersion) + prepare_again());
  }
  if (h.vocab_size == 0 || h.vocab_size > uint32_t(INT32_MAX)) {
    release();
    throw Error("token file " + path + " has an invalid vocab_size " + std::to_string(h.vocab_size) + prepare_again());
  }
  const uint64_t payload = bytes - sizeof(Header);
  if (h.n_tokens > payload / 4) {
    uint64_t n = h.n_tokens;
    release();
    throw Error("token file " + path + " is truncated: header says " + std::to_string(n) + " tokens (" +
                std::to_string(sizeof(Header) + 4 * n) + " bytes) but the file has " + std::to_string(bytes) +
                " bytes" + prepare_again());
  }
  if (payload != 4 * h.n_tokens) {
    uint64_t n = h.n_tokens;
    release();
    throw Error("token file " + path + " has " + std::to_string(bytes) + " bytes, more than the " + std::to_string(n) +
                " tokens its header announces" + prepare_again());
  }
  // A file truncated or replaced while mapped faults (SIGBUS) on the next read of a lost page: named.
  mapping_ = register_mapping(m, bytes, "token file " + path + " was truncated or replaced while this job read it (" +
                                            std::to_string(bytes) + " bytes when it started): leave prepared data "
                                            "alone while a job uses it; prepare into a new folder and point "
                                            "data.dir there");
  n_tokens_ = int64_t(h.n_tokens);
  vocab_size_ = h.vocab_size;
  has_vocab_crc_ = h.version >= 2;
  vocab_crc_ = h.vocab_crc32c;
  data_ = reinterpret_cast<const uint32_t*>(static_cast<const char*>(m) + sizeof(Header));
}

TokenFile::~TokenFile() { release(); }

TokenFile::TokenFile(TokenFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)),
      mapping_(std::exchange(o.mapping_, -1)),
      data_(std::exchange(o.data_, nullptr)),
      n_tokens_(std::exchange(o.n_tokens_, 0)),
      vocab_size_(std::exchange(o.vocab_size_, 0)),
      has_vocab_crc_(std::exchange(o.has_vocab_crc_, false)),
      vocab_crc_(std::exchange(o.vocab_crc_, 0)) {}

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    mapping_ = std::exchange(o.mapping_, -1);
    data_ = std::exchange(o.data_, nullptr);
    n_tokens_ = std::exchange(o.n_tokens_, 0);
    vocab_size_ = std::exchange(o.vocab_size_, 0);
    has_vocab_crc_ = std::exchange(o.has_vocab_crc_, false);
    vocab_crc_ = std::exchange(o.vocab_crc_, 0);
  }
  return *this;
}

void TokenFile::release() noexcept {
  unregister_mapping(std::exchange(mapping_, -1));
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
  data_ = nullptr;
  n_tokens_ = 0;
}

void TokenFile::check_ids() const {
  for (int64_t i = 0; i < n_tokens_; ++i) {
    if (data_[i] >= vocab_size_) {
      throw Error("token file " + path_ + " holds id " + std::to_string(data_[i]) + " at position " +
                  std::to_string(i) + ", outside its vocabulary of " + std::to_string(vocab_size_) +
                  " words: the file is corrupt" + prepare_again());
    }
  }
}

}  // namespace dtrain
