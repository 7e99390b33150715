// Plain, gzip (zlib's gzread) and zstd (libzstd's streaming decoder) byte streams (see byte_stream.hpp).
#include "data/byte_stream.hpp"

#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace dtrain {

namespace {

// The first `n` bytes of a file (fewer when it is shorter).
std::string file_head(const std::string& path, size_t n) {
  const int fd = open_regular_file(path, "input");
  std::string head(n, '\0');
  const ssize_t got = ::pread(fd, head.data(), n, 0);
  ::close(fd);
  head.resize(got > 0 ? size_t(got) : 0);
  return head;
}

std::string damaged(const std::string& path, const std::string& kind, const std::string& why) {
  return "input " + path + " is a damaged or truncated " + kind + " stream (" + why +
         "): download or compress it again, or leave it out";
}

// Reads from a descriptor, retrying on EINTR; Error naming the file on failure.
size_t read_fd(int fd, char* buf, size_t n, const std::string& path) {
  for (;;) {
    const ssize_t got = ::read(fd, buf, n);
    if (got >= 0) return size_t(got);
    if (errno != EINTR)
      throw Error("cannot read input " + path + " (" + std::strerror(errno) + "): check the file and its disk");
  }
}

class PlainStream : public ByteStream {
 public:
  explicit PlainStream(const std::string& path) : path_(path), fd_(open_regular_file(path, "input")) {}
  ~PlainStream() override { ::close(fd_); }
  size_t read(char* buf, size_t n) override {
    const size_t got = read_fd(fd_, buf, n, path_);
    consumed_ += got;
    return got;
  }
  uint64_t consumed() const override { return consumed_; }

 private:
  std::string path_;
  int fd_;
  uint64_t consumed_ = 0;
};

class GzipStream : public ByteStream {
 public:
  explicit GzipStream(const std::string& path) : path_(path) {
    const int fd = open_regular_file(path, "input");
    gz_ = gzdopen(fd, "rb");
    if (!gz_) {
      ::close(fd);
      throw Error("cannot read input " + path + ": zlib could not open it (out of memory?)");
    }
    gzbuffer(gz_, 256 << 10);
  }
  ~GzipStream() override { gzclose_r(gz_); }
  size_t read(char* buf, size_t n) override {
    const unsigned ask = unsigned(std::min<size_t>(n, size_t(1) << 30));
    const int got = gzread(gz_, buf, ask);
    int err = Z_OK;
    const char* msg = gzerror(gz_, &err);
    if (got < 0 || (err != Z_OK && err != Z_STREAM_END)) {
      if (err == Z_ERRNO) throw Error("cannot read input " + path_ + " (" + std::strerror(errno) + ")");
      std::string why = msg ? msg : "zlib error";
      if (why.starts_with("<fd:") && why.find(": ") != std::string::npos) why.erase(0, why.find(": ") + 2);
      throw Error(damaged(path_, "gzip", why));
    }
    return size_t(got);
  }
  uint64_t consumed() const override { return uint64_t(std::max<z_off_t>(gzoffset(gz_), 0)); }

 private:
  std::string path_;
  gzFile gz_ = nullptr;
};

class ZstdStream : public ByteStream {
 public:
  explicit ZstdStream(const std::string& path)
      : path_(path), fd_(open_regular_file(path, "input")), in_buf_(ZSTD_DStreamInSize()) {
    dctx_ = ZSTD_createDCtx();
    if (!dctx_) {
      ::close(fd_);
      throw Error("cannot read input " + path + ": libzstd could not start (out of memory?)");
    }
  }
  ~ZstdStream() override {
    ZSTD_freeDCtx(dctx_);
    ::close(fd_);
  }
  size_t read(char* buf, size_t n) override {
    ZSTD_outBuffer out{buf, n, 0};
    while (out.pos == 0) {
      if (in_.pos == in_.size && !flushing_) {
        const size_t got = read_fd(fd_, in_buf_.data(), in_buf_.size(), path_);
        if (got == 0) {
          if (last_ != 0) throw Error(damaged(path_, "zstd", "it ends inside a frame"));
          return 0;
        }
        in_ = {in_buf_.data(), got, 0};
        consumed_ += got;
      }
      last_ = ZSTD_decompressStream(dctx_, &out, &in_);
      if (ZSTD_isError(last_)) {
        const std::string why = ZSTD_getErrorName(last_);
        if (ZSTD_getErrorCode(last_) == ZSTD_error_frameParameter_windowTooLarge)
          throw Error("input " + path_ + " needs a zstd window over 128 MiB: recompress it without --long=28 or "
                      "above (e.g. zstd -19)");
        throw Error(damaged(path_, "zstd", why));
      }
      flushing_ = out.pos == out.size;  // the decoder may hold more output
    }
    return out.pos;
  }
  uint64_t consumed() const override { return consumed_; }

 private:
  std::string path_;
  int fd_;
  std::vector<char> in_buf_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  ZSTD_DCtx* dctx_ = nullptr;
  size_t last_ = 1;  // the decoder's last hint: 0 when a frame has just ended
  bool flushing_ = false;
  uint64_t consumed_ = 0;
};

}  // namespace

Compression detect_compression(const std::string& path) {
  const std::string head = file_head(path, 4);
  if (head.size() >= 2 && head[0] == '\x1f' && head[1] == '\x8b') return Compression::gzip;
  if (head.size() == 4 && head == std::string("\x28\xb5\x2f\xfd", 4)) return Compression::zstd;
  return Compression::none;
}

bool has_hdf5_signature(const std::string& path) { return file_head(path, 8) == std::string("\x89HDF\r\n\x1a\n", 8); }

std::unique_ptr<ByteStream> open_byte_stream(const std::string& path, Compression compression) {
  switch (compression) {
    case Compression::gzip:
      return std::make_unique<GzipStream>(path);
    case Compression::zstd:
      return std::make_unique<ZstdStream>(path);
    case Compression::none:
      break;
  }
  return std::make_unique<PlainStream>(path);
}

}  // namespace dtrain
