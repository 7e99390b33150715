// safetensors files: 8-byte little-endian header length N, an N-byte JSON header (space-padded to a
// multiple of 8) naming each tensor's dtype, shape and data offsets, then the raw tensor bytes.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace dtrain {

// One tensor to write, or one tensor found in a file. data points at numel*dtype_size bytes.
// In a file, data may be unaligned for its dtype (tensors are packed back to back, as the format
// requires); copy with read_into or memcpy rather than dereferencing it as float*/int32_t*.
struct SafeTensorView {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Writes the tensors in the given order (data back to back, header keys in the same order, then
// "__metadata__" if non-empty) atomically via write_file_atomic. Error on duplicate or empty names,
// the reserved name "__metadata__", negative dimensions, or a null data pointer for a non-empty tensor.
void write_safetensors(const std::string& path, const std::vector<SafeTensorView>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads the whole file into memory and validates it up front (header, dtypes, shapes, offsets,
// overlaps, truncation); every problem is an Error naming the file, the problem and the fix.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<std::string> names() const;  // in file order (by data offset)
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const SafeTensorView& get(const std::string& name) const;  // Error naming tensor and file if missing
  // Copies the tensor into dst after checking dtype and shape match exactly (Error naming both).
  void read_into(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                 void* dst) const;

 private:
  std::string path_;
  std::unique_ptr<std::string> bytes_;  // the whole file; views point into it (stable across moves)
  std::vector<SafeTensorView> tensors_;  // file order
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace dtrain
