// The index of a checkpoint folder (index.json): for every tensor under its global name, its dtype,
// global shape and chunks (a box, the file holding it, the byte range, a CRC-32C), the files' sizes,
// and what the trainer records beside (format, step, model, optimizer, the layout it was saved from).
// docs/checkpoints.md specifies it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ckpt/box.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "tensor/tensor.hpp"

namespace dtrain {

inline constexpr const char* kCheckpointFormat = "dtrain-checkpoint-2";

// A checkpoint that cannot be trusted: missing index, truncated file, failed checksum. Callers may
// fall back to an older checkpoint; the message names the file and what is wrong with it.
class CheckpointDamaged : public Error {
 public:
  explicit CheckpointDamaged(const std::string& what) : Error(what) {}
};

struct ChunkRecord {
  Box box;
  std::string file;         // within the checkpoint folder
  int64_t byte_offset = 0;  // in the file
  int64_t byte_size = 0;
  uint32_t crc32c = 0;      // of those bytes
};

struct TensorRecord {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<ChunkRecord> chunks;
};

struct FileRecord {
  int64_t bytes = 0;
  bool has_crc = false;  // data files are checked chunk by chunk; small files (trainer.json) whole
  uint32_t crc32c = 0;
  int64_t header_bytes = 0;  // a data file's leading bytes that no chunk covers (a safetensors header)
  uint32_t header_crc32c = 0;
};

struct CheckpointIndex {
  Json meta = Json::object();  // format, step, model, optimizer, saved_from, ...
  std::map<std::string, TensorRecord> tensors;
  std::map<std::string, FileRecord> files;

  Json to_json() const;
  // Error (CheckpointDamaged) naming `source` when the text is not a valid index.
  static CheckpointIndex from_json(const Json& j, const std::string& source);
  // dir/index.json; CheckpointDamaged when it is missing or unreadable, or when a tensor's chunks do
  // not tile it exactly once (tiling_problems).
  static CheckpointIndex read(const std::string& dir);
  // One line per tensor whose chunks leave an element uncovered, cover one twice or reach outside
  // it (a complete index; a rank's part of one covers only what that rank wrote). Empty: all tile.
  std::vector<std::string> tiling_problems(const std::string& source) const;
  void write(const std::string& dir) const;  // atomically

  // Adds a chunk (its tensor is created with dtype and shape on first use; Error if they disagree).
  void add(const std::string& tensor, DType dtype, const std::vector<int64_t>& shape, ChunkRecord chunk);
  // Records a small whole file of the folder (its size and checksum).
  void add_file(const std::string& dir, const std::string& name);
  // Records a data file's size and the checksum of its first header_bytes bytes.
  void add_data_file(const std::string& dir, const std::string& name, int64_t header_bytes);
  int64_t data_bytes() const;  // sum of all chunks' bytes
};

// CheckpointDamaged unless `path` (a file of a checkpoint) exists and can be looked at: missing
// (`why_missing` says what that means), or unreadable (a symbolic link that loops, permissions).
void require_present(const std::string& path, const std::string& why_missing);

// dtype names as safetensors writes them (F32, BF16, I32); Error for another name.
DType dtype_from_name(const std::string& name, const std::string& source);

}  // namespace dtrain
