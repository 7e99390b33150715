// Packed image files: writer (temp file + rename), a validated read-only memory map, and meta.json.
#include "data/image_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/atomic_file.hpp"
#include "core/crc32c.hpp"
#include "core/descriptors.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "core/limits.hpp"

namespace dtrain {

static_assert(std::endian::native == std::endian::little, "dtrain image files assume a little-endian host");

namespace {

struct ImageHeader {
  char magic[8];
  uint32_t version;
  uint32_t channels;
  uint32_t height;
  uint32_t width;
  uint64_t count;
  uint32_t classes;
  uint32_t payload_crc32c;
};
static_assert(sizeof(ImageHeader) == kImageFileHeaderBytes);

const std::string kPrepareAgain =
    ": prepare the folder again (`dtrain data prepare --format idx` or `dtrain data fashion-mnist`)";

}  // namespace

std::string ImageShape::text() const {
  return std::to_string(channels) + "×" + std::to_string(height) + "×" + std::to_string(width);
}

void write_image_file(const std::string& path, const ImageShape& shape, int classes, std::span<const uint8_t> pixels,
                      std::span<const uint8_t> labels) {
  DT_ASSERT(shape.pixels() > 0 && classes >= 1 && classes <= kMaxImageClasses);
  DT_ASSERT(pixels.size() == labels.size() * size_t(shape.pixels()));
  for (uint8_t l : labels) DT_ASSERT(l < classes);
  ImageHeader h{};
  std::memcpy(h.magic, kImageFileMagic, sizeof(h.magic));
  h.version = kImageFileVersion;
  h.channels = uint32_t(shape.channels);
  h.height = uint32_t(shape.height);
  h.width = uint32_t(shape.width);
  h.count = labels.size();
  h.classes = uint32_t(classes);
  h.payload_crc32c = crc32c(labels.data(), labels.size(), crc32c(pixels.data(), pixels.size()));
  AtomicFile w(path);
  w.write(&h, sizeof(h));
  w.write(pixels.data(), pixels.size());
  w.write(labels.data(), labels.size());
  w.commit();
}

// The read-only mapping of a file, registered for the SIGBUS handler (core/limits.hpp).
struct ImageFile::Mapping {
  void* addr = nullptr;
  size_t bytes = 0;
  int handle = -1;
  ~Mapping() {
    unregister_mapping(handle);
    if (addr) ::munmap(addr, bytes);
  }
};

ImageFile::ImageFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a pipe: refused below, not waited on
  if (fd < 0) {
    const int err = errno;
    throw_if_out_of_descriptors(err, "cannot open image file " + path);
    throw Error("cannot open image file " + path + " (" + std::strerror(err) + ")" + kPrepareAgain);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("image file " + path + " is not a regular file" + kPrepareAgain);
  }
  const uint64_t bytes = uint64_t(st.st_size);
  if (bytes < sizeof(ImageHeader)) {
    ::close(fd);
    throw Error("image file " + path + " is truncated: " + std::to_string(bytes) + " bytes, less than its " +
                std::to_string(sizeof(ImageHeader)) + "-byte header" + kPrepareAgain);
  }
  void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (m == MAP_FAILED)
    throw Error("cannot map image file " + path + " (" + std::strerror(err) + "): check free memory and the file");
  map_ = std::make_unique<Mapping>();
  map_->addr = m;
  map_->bytes = bytes;

  ImageHeader h{};
  std::memcpy(&h, m, sizeof(h));
  require(std::memcmp(h.magic, kImageFileMagic, sizeof(h.magic)) == 0,
          path + " is not a dtrain image file (bad magic)" + kPrepareAgain);
  require(h.version == kImageFileVersion, "image file " + path + " has version " + std::to_string(h.version) +
                                              " but this dtrain reads version " + std::to_string(kImageFileVersion) +
                                              kPrepareAgain);
  const ImageShape shape{h.channels, h.height, h.width};
  require(h.channels >= 1 && h.height >= 1 && h.width >= 1 && shape.pixels() <= (int64_t(1) << 24) &&
              h.classes >= 1 && h.classes <= uint32_t(kMaxImageClasses),
          "image file " + path + " has an invalid header (images " + shape.text() + ", " + std::to_string(h.classes) +
              " classes)" + kPrepareAgain);
  const uint64_t payload = bytes - sizeof(ImageHeader);
  const uint64_t per_sample = uint64_t(shape.pixels()) + 1;
  require(h.count <= payload / per_sample,
          "image file " + path + " is truncated: its header says " + std::to_string(h.count) + " images of " +
              shape.text() + " (" + std::to_string(sizeof(ImageHeader) + h.count * per_sample) + " bytes) but the file has " +
              std::to_string(bytes) + kPrepareAgain);
  require(payload == h.count * per_sample, "image file " + path + " has " + std::to_string(bytes) +
                                               " bytes, more than the " + std::to_string(h.count) +
                                               " images its header announces" + kPrepareAgain);
  const uint8_t* base = static_cast<const uint8_t*>(m) + sizeof(ImageHeader);
  require(crc32c(base, payload) == h.payload_crc32c,
          "image file " + path + " is damaged: its pixels and labels do not match the checksum in its header" +
              kPrepareAgain);
  // A file truncated or replaced while mapped faults (SIGBUS) on the next read of a lost page: named.
  map_->handle = register_mapping(m, bytes, "image file " + path + " was truncated or replaced while this job read it (" +
                                                std::to_string(bytes) + " bytes when it started): leave prepared "
                                                "data alone while a job uses it; prepare into a new folder and point "
                                                "data.dir there");
  shape_ = shape;
  count_ = int64_t(h.count);
  classes_ = int(h.classes);
  pixels_ = base;
  labels_ = base + h.count * uint64_t(shape.pixels());
  for (int64_t i = 0; i < count_; ++i)  // the checksum holds, so only a bad prepare could do this
    require(labels_[i] < h.classes, "image file " + path + " holds label " + std::to_string(labels_[i]) + " at sample " +
                                        std::to_string(i) + ", outside its " + std::to_string(h.classes) + " classes" +
                                        kPrepareAgain);
}

ImageFile::~ImageFile() = default;
ImageFile::ImageFile(ImageFile&&) noexcept = default;
ImageFile& ImageFile::operator=(ImageFile&&) noexcept = default;

void write_image_meta(const std::string& path, const ImageMeta& m) {
  Json j = Json::object();
  j["format"] = "images";
  j["version"] = kImageMetaVersion;
  j["channels"] = m.shape.channels;
  j["height"] = m.shape.height;
  j["width"] = m.shape.width;
  j["classes"] = m.classes;
  j["class_names"] = m.class_names;
  j["mean"] = m.mean;
  j["std"] = m.std;
  j["normalization"] = m.normalization;
  j["samples"] = {{"train", m.train}, {"valid", m.valid}, {"test", m.test}};
  j["files"] = "{train,valid,test}.images: header, uint8 pixels (channel, row, column), uint8 labels";
  j["source"] = {{"dataset", m.dataset}, {"format", m.source_format}, {"dir", m.source_dir}, {"files", m.source_files}};
  j["valid_cut"] = {{"from", "train"},
                    {"count", m.valid_count},
                    {"seed", int64_t(m.valid_seed)},
                    {"method", "the source's train samples in a seeded Philox permutation (Fisher-Yates); the "
                               "first count of it are valid, the rest train, each kept in file order"}};
  write_file_atomic(path, j.dump(2) + "\n");
}

bool is_image_meta(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  try {
    const Json j = parse_json(read_file(path, kMaxSmallFileBytes, "image meta"), path);
    return j.is_object() && j.contains("format") && j["format"] == "images";
  } catch (const Error&) {
    return false;
  }
}

ImageMeta read_image_meta(const std::string& path) {
  return parse_image_meta(read_file(path, kMaxSmallFileBytes, "image meta"), path);
}

ImageMeta parse_image_meta(const std::string& text, const std::string& path) {
  const Json j = parse_json(text, path);
  require(j.is_object() && json_get<std::string>(j, "format", path) == "images",
          path + " does not describe image data (\"format\": \"images\")" + kPrepareAgain);
  const int64_t version = json_get<int64_t>(j, "version", path);
  require(version == kImageMetaVersion, path + " has version " + std::to_string(version) + " but this dtrain reads " +
                                            std::to_string(kImageMetaVersion) + kPrepareAgain);
  ImageMeta m;
  auto whole = [&](const char* key, int64_t lo, int64_t hi) {
    const int64_t v = json_get<int64_t>(j, key, path);
    require(v >= lo && v <= hi, path + ": " + key + " = " + std::to_string(v) + " is outside " + std::to_string(lo) +
                                    ".." + std::to_string(hi) + kPrepareAgain);
    return v;
  };
  m.shape = {whole("channels", 1, 1 << 24), whole("height", 1, 1 << 24), whole("width", 1, 1 << 24)};
  m.classes = int(whole("classes", 1, kMaxImageClasses));
  const Json& names = json_at(j, "class_names", path);
  require(names.is_array() && names.size() == size_t(m.classes),
          path + ": class_names is not a list of " + std::to_string(m.classes) + " names" + kPrepareAgain);
  for (const Json& n : names) {
    require(n.is_string(), path + ": class_names holds a " + std::string(n.type_name()) + ", not a name" + kPrepareAgain);
    m.class_names.push_back(n.get<std::string>());
  }
  m.mean = json_get<double>(j, "mean", path);
  m.std = json_get<double>(j, "std", path);
  require(std::isfinite(m.mean) && std::isfinite(m.std) && m.std > 0,
          path + ": mean " + std::to_string(m.mean) + " and std " + std::to_string(m.std) +
              " cannot normalise pixels (std must be > 0)" + kPrepareAgain);
  m.normalization = json_get<std::string>(j, "normalization", path);
  m.train = whole("samples.train", 1, INT64_MAX);
  m.valid = whole("samples.valid", 1, INT64_MAX);
  m.test = whole("samples.test", 1, INT64_MAX);
  m.dataset = json_get<std::string>(j, "source.dataset", path);
  m.source_format = json_get<std::string>(j, "source.format", path);
  m.source_dir = json_get<std::string>(j, "source.dir", path);
  for (const Json& f : json_at(j, "source.files", path))
    if (f.is_string()) m.source_files.push_back(f.get<std::string>());
  m.valid_count = json_get<int64_t>(j, "valid_cut.count", path);
  m.valid_seed = uint64_t(json_get<int64_t>(j, "valid_cut.seed", path));
  return m;
}

}  // namespace dtrain
