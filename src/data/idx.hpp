// The IDX format of MNIST and Fashion-MNIST (train-images-idx3-ubyte, …, each possibly .gz):
// finding the four files in a folder and reading them, every bad file one Error line.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

// IDX: a big-endian header (magic 0x00000803 for images: count, rows, cols; 0x00000801 for labels:
// count), then the values as unsigned bytes, sample-major, rows top to bottom.
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;

struct IdxImages {
  std::string path;
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count × rows × cols
};

struct IdxLabels {
  std::string path;
  int64_t count = 0;
  std::vector<uint8_t> labels;  // count
};

// Reads a plain or gzip-compressed IDX file (zlib tells them apart by content, not by name).
// Error naming the file, the problem and the fix: not found, a wrong magic (a labels file given as
// images, or not IDX at all), a header that promises more bytes than there are (truncated), bytes
// after the promised ones (trailing garbage), a damaged gzip stream, an image of no or too many
// pixels (more than 2^24).
IdxImages read_idx_images(const std::string& path);
IdxLabels read_idx_labels(const std::string& path);

// The four files of an IDX data set.
struct IdxFiles {
  std::string train_images, train_labels, test_images, test_labels;
};

// The names looked for, one per file, each also with a dot for the last dash
// (`train-images.idx3-ubyte`) and each with or without `.gz`.
inline constexpr const char* kIdxNames[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

// The IDX files of `dir`: nullopt when it holds none of them, Error naming the missing ones (and
// every name looked for) when it holds some. A file there both plain and gzipped is read plain.
std::optional<IdxFiles> find_idx_files(const std::string& dir);

}  // namespace dtrain
