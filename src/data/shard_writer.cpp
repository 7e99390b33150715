// One split's shards, document index and manifest, written into its staging folder (see
// shard_writer.hpp). Files are written through a 1 MiB buffer and fsynced when closed.
#include "data/shard_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "data/mapped_file.hpp"
#include "data/shard_format.hpp"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

constexpr size_t kWriteBufferBytes = size_t(1) << 20;
constexpr size_t kNarrowIds = size_t(1) << 16;  // ids narrowed to uint16 at a time

[[noreturn]] void write_failed(const std::string& path, int err) {
  throw Error("cannot write " + path + " (" + std::strerror(err) + "): " +
              (err == ENOSPC || err == EDQUOT ? "free space on its disk" : "check the output folder") +
              ", or choose another --out");
}

}  // namespace

// A new file written through a buffer; pwrite patches a header; close() fsyncs it.
class SplitWriter::Output {
 public:
  explicit Output(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) write_failed(path_, errno);
    buffer_.reserve(kWriteBufferBytes);
  }
  ~Output() {
    if (fd_ >= 0) ::close(fd_);
  }
  const std::string& path() const { return path_; }
  int64_t bytes() const { return bytes_; }
  void write(const void* data, size_t n) {
    bytes_ += int64_t(n);
    if (buffer_.size() + n > kWriteBufferBytes) flush();
    if (n >= kWriteBufferBytes) return write_all(static_cast<const char*>(data), n);
    buffer_.insert(buffer_.end(), static_cast<const char*>(data), static_cast<const char*>(data) + n);
  }
  void pwrite_at(const void* data, size_t n, int64_t offset) {
    flush();
    if (::pwrite(fd_, data, n, offset) != ssize_t(n)) write_failed(path_, errno ? errno : EIO);
  }
  void close() {
    flush();
    if (::fsync(fd_) != 0) write_failed(path_, errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) write_failed(path_, errno);
  }

 private:
  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  void write_all(const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) write_failed(path_, w < 0 ? errno : EIO);
      p += w;
      n -= size_t(w);
    }
  }
  std::string path_;
  int fd_ = -1;
  int64_t bytes_ = 0;
  std::vector<char> buffer_;
};

SplitWriter::SplitWriter(SplitWriterSettings settings) : s_(std::move(settings)) {
  DT_ASSERT((s_.id_bytes == 2 || s_.id_bytes == 4) && s_.shard_tokens > 0 && s_.vocab_size > 0);
  if (::mkdir(s_.dir.c_str(), 0755) != 0) write_failed(s_.dir, errno);
  index_ = std::make_unique<Output>((fs::path(s_.dir) / kDocumentsFile).string());
  const uint64_t header[2] = {0, 0};  // magic and count, written by finish()
  const uint64_t zero = 0;            // document 0 starts at token 0
  index_->write(header, sizeof header);
  index_->write(&zero, sizeof zero);
  if (s_.id_bytes == 2) narrow_ = std::make_unique<uint16_t[]>(kNarrowIds);
}

SplitWriter::~SplitWriter() = default;

int64_t SplitWriter::shards() const { return int64_t(shard_list_.size()) + (shard_ ? 1 : 0); }

void SplitWriter::open_shard() {
  const std::string name = shard_file_name(int64_t(shard_list_.size()));
  shard_ = std::make_unique<Output>((fs::path(s_.dir) / name).string());
  // Written now as if the shard will be full; close_shard() rewrites it when it is not.
  const ShardHeader h = make_shard_header(uint32_t(s_.id_bytes), s_.vocab_size, s_.tokenizer_crc32c,
                                          uint64_t(s_.shard_tokens), uint64_t(tokens_));
  shard_->write(&h, sizeof h);
  shard_crc_ = crc32c(&h, sizeof h);
  shard_fill_ = 0;
}

void SplitWriter::close_shard() {
  uint32_t crc = shard_crc_;
  const bool full = shard_fill_ == s_.shard_tokens;
  if (!full) {
    const ShardHeader h = make_shard_header(uint32_t(s_.id_bytes), s_.vocab_size, s_.tokenizer_crc32c,
                                            uint64_t(shard_fill_), uint64_t(tokens_ - shard_fill_));
    shard_->pwrite_at(&h, sizeof h, 0);
  }
  shard_->close();
  if (!full) crc = checksum_file(shard_->path(), "token shard").crc32c;  // the header changed: read it back
  Json entry;
  entry["file"] = fs::path(shard_->path()).filename().string();
  entry["tokens"] = shard_fill_;
  entry["bytes"] = shard_->bytes();
  entry["crc32c"] = crc;
  shard_list_.push_back(std::move(entry));
  shard_.reset();
}

void SplitWriter::write_ids(std::span<const uint32_t> ids) {
  if (s_.id_bytes == 4) {
    shard_->write(ids.data(), ids.size_bytes());
    shard_crc_ = crc32c(ids.data(), ids.size_bytes(), shard_crc_);
    return;
  }
  while (!ids.empty()) {
    const size_t n = std::min(ids.size(), kNarrowIds);
    for (size_t i = 0; i < n; ++i) narrow_[i] = uint16_t(ids[i]);
    shard_->write(narrow_.get(), n * 2);
    shard_crc_ = crc32c(narrow_.get(), n * 2, shard_crc_);
    ids = ids.subspan(n);
  }
}

void SplitWriter::append(std::span<const uint32_t> ids) {
  while (!ids.empty()) {
    if (!shard_) open_shard();
    const size_t n = size_t(std::min<int64_t>(int64_t(ids.size()), s_.shard_tokens - shard_fill_));
    write_ids(ids.first(n));
    shard_fill_ += int64_t(n);
    tokens_ += int64_t(n);
    ids = ids.subspan(n);
    if (shard_fill_ == s_.shard_tokens) close_shard();
  }
}

void SplitWriter::end_document() {
  const uint64_t end = uint64_t(tokens_);
  index_->write(&end, sizeof end);
  ++documents_;
}

Json SplitWriter::finish(const Json& context) {
  if (shard_) close_shard();
  char header[kDocumentsHeaderBytes];
  const uint64_t count = uint64_t(documents_);
  std::memcpy(header, kDocumentsMagic, 8);
  std::memcpy(header + 8, &count, 8);
  index_->pwrite_at(header, sizeof header, 0);
  index_->close();
  const FileChecksum index_sum = checksum_file(index_->path(), "document index");

  Json m;
  m["format"] = kShardsFormat;
  m["version"] = kShardsManifestVersion;
  m["split"] = s_.split;
  m["tokenizer"] = context.at("tokenizer");
  m["id_bytes"] = s_.id_bytes;
  m["tokens"] = tokens_;
  m["documents"] = documents_;
  m["skipped_documents"] = skipped_;
  m["shard_tokens"] = s_.shard_tokens;
  m["shards"] = shard_list_;
  m["documents_file"] = {{"file", kDocumentsFile}, {"bytes", index_sum.bytes}, {"crc32c", index_sum.crc32c}};
  m["inputs"] = context.at("inputs");
  m["options"] = context.at("options");
  write_file_atomic((fs::path(s_.dir) / kManifestFile).string(), m.dump(2) + "\n");
  return m;
}

}  // namespace dtrain
