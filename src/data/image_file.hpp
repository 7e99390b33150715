// Packed image files (one per split: a 40-byte header, uint8 pixels, uint8 labels), memory-mapped
// read-only for training, and the meta.json that describes a folder of them.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace dtrain {

// Layout: "DTRIMG01", uint32 version (1), uint32 channels, uint32 height, uint32 width, uint64 count,
// uint32 classes, uint32 payload_crc32c (the CRC-32C of everything after the header), then
// count × channels × height × width uint8 pixels (sample-major; channel, row, column), then count
// uint8 labels (each < classes, so at most 256 classes). All little-endian.
inline constexpr char kImageFileMagic[8] = {'D', 'T', 'R', 'I', 'M', 'G', '0', '1'};
inline constexpr uint32_t kImageFileVersion = 1;
inline constexpr int64_t kImageFileHeaderBytes = 40;
inline constexpr int kMaxImageClasses = 256;

// One image's size.
struct ImageShape {
  int64_t channels = 0, height = 0, width = 0;
  int64_t pixels() const { return channels * height * width; }
  std::string text() const;  // "1×28×28"
  bool operator==(const ImageShape&) const = default;
};

// Writes an image file through a temporary file and a rename; pixels holds labels.size() images.
void write_image_file(const std::string& path, const ImageShape& shape, int classes, std::span<const uint8_t> pixels,
                      std::span<const uint8_t> labels);

class ImageFile {
 public:
  // Maps `path` read-only and checks the header, the length, the payload's CRC-32C and every label.
  explicit ImageFile(const std::string& path);
  ~ImageFile();
  ImageFile(ImageFile&&) noexcept;
  ImageFile& operator=(ImageFile&&) noexcept;

  const std::string& path() const { return path_; }
  int64_t size() const { return count_; }  // samples
  const ImageShape& shape() const { return shape_; }
  int classes() const { return classes_; }
  const uint8_t* pixels(int64_t i) const { return pixels_ + i * shape_.pixels(); }  // shape().pixels() bytes
  int32_t label(int64_t i) const { return labels_[i]; }

 private:
  struct Mapping;
  std::string path_;
  std::unique_ptr<Mapping> map_;
  ImageShape shape_;
  int64_t count_ = 0;
  int classes_ = 0;
  const uint8_t* pixels_ = nullptr;
  const uint8_t* labels_ = nullptr;
};

// What meta.json says about a folder of image files (written last by a prepare, so a folder with it
// is complete). Keys as in the JSON: see docs/architecture.md "The data interface".
struct ImageMeta {
  ImageShape shape;
  int classes = 0;
  std::vector<std::string> class_names;  // one per class
  double mean = 0, std = 1;              // the loader feeds (pixel / 255 - mean) / std
  std::string normalization;             // where mean and std came from, in words
  int64_t train = 0, valid = 0, test = 0;  // samples per split
  // Where the data came from.
  std::string dataset;  // "Fashion-MNIST", or "" for IDX files of unknown origin
  std::string source_format, source_dir;
  std::vector<std::string> source_files;
  // How valid was cut from the source's train set.
  int64_t valid_count = 0;
  uint64_t valid_seed = 0;
};

inline constexpr int kImageMetaVersion = 1;

void write_image_meta(const std::string& path, const ImageMeta& meta);
// Error naming the file, the key and `dtrain data prepare` when it is missing, malformed or not
// image data's.
ImageMeta read_image_meta(const std::string& path);
// The same from meta.json's text, read already (a checkpoint's data.json, checked against its index).
ImageMeta parse_image_meta(const std::string& text, const std::string& path);
// True when `path` is a meta.json of image data ("format": "images"); false for anything else.
bool is_image_meta(const std::string& path);

}  // namespace dtrain
