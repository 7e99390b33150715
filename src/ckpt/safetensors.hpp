// safetensors files: 8-byte little-endian header length N, an N-byte JSON header (space-padded to a
// multiple of 8) naming each tensor's dtype, shape and data offsets, then the raw tensor bytes.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/atomic_file.hpp"
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

// Describes one tensor to be written later (name, dtype, shape), without its data.
struct SafeTensorSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};

// The specs of tensors at hand (their names, dtypes and shapes).
std::vector<SafeTensorSpec> specs_of(const std::vector<SafeTensorView>& tensors);

// Writes a safetensors file tensor by tensor, so that not all tensors need to be in memory at once:
// the header (all names, dtypes, shapes, offsets, and metadata) is made and validated up front from
// the specs, then append() gives each tensor's bytes in the spec order; commit() makes the file
// appear atomically (AtomicFile). Destroyed without commit, nothing appears. Same validation errors
// as write_safetensors (one line naming file, tensor, fix).
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, std::vector<SafeTensorSpec> specs,
                    const std::map<std::string, std::string>& metadata = {});
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The next tensor's bytes (numel * dtype size bytes at data; may be null for an empty tensor).
  // Error if called more times than there are specs. Returns where in the file its bytes start.
  uint64_t append(const void* data);
  // The next tensor's bytes given in parts, in order: its next `bytes` bytes (the tensor is done
  // when all its bytes are given). Error past the tensor's size. Returns where these bytes start.
  uint64_t append_part(const void* data, size_t bytes);
  const SafeTensorSpec& next() const;  // the spec append() expects next (internal assertion if none left)
  bool done() const { return next_ == specs_.size(); }  // every tensor appended
  uint64_t data_start() const { return data_start_; }   // bytes of the length and header before the data
  void commit();  // Error if not every tensor was appended

 private:
  std::string path_;
  std::vector<SafeTensorSpec> specs_;
  std::vector<uint64_t> nbytes_;  // per spec
  size_t next_ = 0;
  uint64_t part_ = 0;  // bytes of tensor next_ already given by append_part
  uint64_t at_ = 0;  // bytes written so far (header included)
  uint64_t data_start_ = 0;
  std::optional<AtomicFile> file_;  // opened once the header is valid
};

// Writes the tensors in the given order (data back to back, header keys in the same order, after
// "__metadata__" if non-empty) atomically, via SafetensorsWriter. Error on duplicate or empty names,
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
