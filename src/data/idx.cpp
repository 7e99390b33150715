// IDX files (see idx.hpp): read through zlib, which reads plain and gzip-compressed files alike, with
// each way a file can be bad named in one line.
#include "data/idx.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/descriptors.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

const std::string kRefetch = "fetch the file again, or decompress a good copy";

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

// A plain or gzip-compressed file read front to back; errors name the file.
class IdxStream {
 public:
  IdxStream(const std::string& path, const std::string& what) : path_(path), what_(what) {
    std::error_code ec;
    if (fs::is_directory(path, ec))
      throw Error("IDX " + what + " file " + path + " is a folder: give the file itself");
    const int fd = open_regular_file(path, "IDX " + what + " file");  // never a pipe or a device
    gz_ = gzdopen(fd, "rb");
    if (!gz_) {
      ::close(fd);
      throw Error("cannot read IDX " + what + " file " + path + ": zlib could not start (out of memory?)");
    }
    gzbuffer(gz_, 1u << 17);
  }
  ~IdxStream() {
    if (gz_) gzclose_r(gz_);
  }
  IdxStream(const IdxStream&) = delete;
  IdxStream& operator=(const IdxStream&) = delete;

  // Reads up to n bytes and returns how many there were: fewer at the end of the data. Error for a
  // damaged or cut gzip stream.
  size_t read(void* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      const unsigned chunk = unsigned(std::min<size_t>(n - got, size_t(1) << 30));
      const int r = gzread(gz_, static_cast<char*>(dst) + got, chunk);
      if (r <= 0) break;
      got += size_t(r);
    }
    if (got < n) check_stream();
    return got;
  }

  // After a short read: a clean end of the data, or the stream is damaged (Error).
  void check_stream() {
    int errnum = Z_OK;
    std::string msg = gzerror(gz_, &errnum);
    if (errnum == Z_OK) return;
    if (msg.rfind("<fd:", 0) == 0 && msg.find(": ") != std::string::npos) msg.erase(0, msg.find(": ") + 2);
    if (errnum == Z_ERRNO)
      throw Error("error while reading IDX " + what_ + " file " + path_ + " (" + std::strerror(errno) +
                  "): check the file and the disk it is on");
    if (errnum == Z_BUF_ERROR)
      throw Error("IDX " + what_ + " file " + path_ + " is a cut gzip stream (zlib: " + msg + "): " + kRefetch);
    throw Error("IDX " + what_ + " file " + path_ + " is a damaged gzip stream (zlib: " + msg + "): " + kRefetch);
  }

  // Bytes left after the data (read and counted to the end).
  int64_t count_rest() {
    int64_t rest = 0;
    std::vector<char> buf(size_t(1) << 16);
    for (;;) {
      const size_t r = read(buf.data(), buf.size());
      rest += int64_t(r);
      if (r < buf.size()) return rest;
    }
  }

 private:
  std::string path_, what_;
  gzFile gz_ = nullptr;
};

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

// The header of an IDX file of `dims` dimensions (3: images, 1: labels): its sizes.
std::vector<int64_t> read_header(IdxStream& s, const std::string& path, const std::string& what, int dims) {
  const std::string names = "images: *-images-idx3-ubyte, labels: *-labels-idx1-ubyte";
  uint8_t m[4];
  const size_t got = s.read(m, 4);
  if (got == 0) throw Error("IDX " + what + " file " + path + " is empty: " + kRefetch);
  if (got < 4)
    throw Error("IDX " + what + " file " + path + " is truncated: " + std::to_string(got) +
                " bytes, less than its 4-byte magic number: " + kRefetch);
  const uint32_t magic = big_endian(m);
  const uint32_t expected = dims == 3 ? kIdxImagesMagic : kIdxLabelsMagic;
  if (magic != expected) {
    if (m[0] != 0 || m[1] != 0)
      throw Error(path + " is not an IDX " + what + " file (magic " + hex32(magic) + ", expected " + hex32(expected) +
                  "): give MNIST-format files (" + names + ", plain or .gz)");
    if (m[2] != 0x08)
      throw Error("IDX " + what + " file " + path + " holds values of type " + hex32(m[2]).substr(8) +
                  " (magic " + hex32(magic) + "), but dtrain reads unsigned bytes (type 08, magic " + hex32(expected) +
                  "): convert the data to unsigned bytes");
    if (magic == kIdxLabelsMagic || magic == kIdxImagesMagic)
      throw Error(path + " is an IDX " + (magic == kIdxLabelsMagic ? "labels" : "images") + " file (magic " +
                  hex32(magic) + "), but the " + what + " file (magic " + hex32(expected) +
                  ") was expected here: the files are misnamed or swapped; name them " + names);
    throw Error("IDX " + what + " file " + path + " has " + std::to_string(m[3]) + " dimensions (magic " + hex32(magic) +
                "), but " + what + " have " + std::to_string(dims) + " (magic " + hex32(expected) +
                "): give MNIST-format files (" + names + ")");
  }
  std::vector<uint8_t> raw(size_t(4 * dims));
  const size_t have = s.read(raw.data(), raw.size());
  if (have < raw.size())
    throw Error("IDX " + what + " file " + path + " is truncated: " + std::to_string(4 + have) + " bytes, less than its " +
                std::to_string(4 + raw.size()) + "-byte header: " + kRefetch);
  std::vector<int64_t> sizes(static_cast<size_t>(dims));
  for (int d = 0; d < dims; ++d) sizes[size_t(d)] = int64_t(big_endian(raw.data() + 4 * d));
  return sizes;
}

// The `bytes` values after the header, then no more: Error for fewer (truncated) or more (trailing).
std::vector<uint8_t> read_values(IdxStream& s, const std::string& path, const std::string& what, int64_t header_bytes,
                                 int64_t bytes, const std::string& promise) {
  std::vector<uint8_t> v;
  constexpr int64_t kChunk = int64_t(16) << 20;
  int64_t got = 0;
  while (got < bytes) {
    const int64_t chunk = std::min(bytes - got, kChunk);
    v.resize(size_t(got + chunk));
    const int64_t r = int64_t(s.read(v.data() + got, size_t(chunk)));
    got += r;
    if (r < chunk) break;
  }
  if (got < bytes)
    throw Error("IDX " + what + " file " + path + " is truncated: its header promises " + promise + " (" +
                std::to_string(header_bytes + bytes) + " bytes in all) but it has " +
                std::to_string(header_bytes + got) + ": " + kRefetch);
  const int64_t rest = s.count_rest();
  if (rest > 0)
    throw Error("IDX " + what + " file " + path + " has " + std::to_string(rest) + " bytes of trailing garbage after the " +
                promise + " its header promises (a wrong count in the header, or two files joined): " + kRefetch);
  return v;
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  const std::string what = "images";
  IdxStream s(path, what);
  const std::vector<int64_t> d = read_header(s, path, what, 3);
  IdxImages im;
  im.path = path;
  im.count = d[0];
  im.rows = d[1];
  im.cols = d[2];
  require(im.rows >= 1 && im.cols >= 1 && im.rows * im.cols <= (int64_t(1) << 24),
          "IDX images file " + path + " has images of " + std::to_string(im.rows) + "×" + std::to_string(im.cols) +
              " pixels in its header: an image needs from 1 to 2^24 pixels; " + kRefetch);
  const std::string promise =
      std::to_string(im.count) + " images of " + std::to_string(im.rows) + "×" + std::to_string(im.cols);
  im.pixels = read_values(s, path, what, 16, im.count * im.rows * im.cols, promise);
  return im;
}

IdxLabels read_idx_labels(const std::string& path) {
  const std::string what = "labels";
  IdxStream s(path, what);
  IdxLabels lb;
  lb.path = path;
  lb.count = read_header(s, path, what, 1)[0];
  lb.labels = read_values(s, path, what, 8, lb.count, std::to_string(lb.count) + " labels");
  return lb;
}

std::optional<IdxFiles> find_idx_files(const std::string& dir) {
  std::string found[4];
  int n_found = 0;
  for (int f = 0; f < 4; ++f) {
    const std::string name = kIdxNames[f];
    std::string dotted = name;
    dotted[dotted.rfind("-idx")] = '.';
    for (const std::string& candidate : {name, dotted, name + ".gz", dotted + ".gz"}) {
      std::error_code ec;
      const fs::path p = fs::path(dir) / candidate;
      if (fs::exists(p, ec) && !fs::is_directory(p, ec)) {
        found[f] = p.string();
        ++n_found;
        break;
      }
    }
  }
  if (n_found == 0) return std::nullopt;
  if (n_found < 4) {
    std::string have, missing;
    for (int f = 0; f < 4; ++f) {
      std::string& list = found[f].empty() ? missing : have;
      list += (list.empty() ? "" : ", ") + (found[f].empty() ? std::string(kIdxNames[f]) + "[.gz]"
                                                             : fs::path(found[f]).filename().string());
    }
    throw Error("IDX folder " + dir + " has " + have + " but no " + missing +
                " (each also looked for with a dot before idx, e.g. train-images.idx3-ubyte): add the missing files");
  }
  return IdxFiles{found[0], found[1], found[2], found[3]};
}

}  // namespace dtrain
