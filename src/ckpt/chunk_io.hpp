// Chunk data of checkpoints: writing tensors' boxes into a raw data file (little-endian, each chunk
// aligned, each with a CRC-32C in the index), and reading any set of boxes back by intersecting
// them with the saved chunks, reading only those (pread), each checked against its checksum.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/index.hpp"

namespace dtrain {

inline constexpr int64_t kChunkAlign = 4096;          // every chunk of a data file starts at a multiple
inline constexpr int64_t kMaxChunkBytes = 4 << 20;    // a box is cut into chunks of at most this

// A box of a tensor to save: data holds its elements, row-major over the box, contiguous.
struct ChunkSource {
  std::string tensor;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;  // the tensor's global shape
  Box box;
  const void* data = nullptr;
};

// A box of a tensor to load into data (row-major over the box).
struct ChunkTarget {
  std::string tensor;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  Box box;
  void* data = nullptr;
};

// Calls fn for each piece of `box` of at most max_bytes, in row-major order, with the piece's bytes
// (within data, the row-major data of box).
void for_each_piece(const Box& box, const void* data, size_t elem, int64_t max_bytes,
                    const std::function<void(const Box& piece, const char* bytes, size_t n)>& fn);

// Writes the sources into dir/file (atomically, fsynced), each piece of at most max_chunk_bytes at
// a multiple of kChunkAlign, and records the chunks and the file in `index`. Returns bytes written.
int64_t write_chunk_file(const std::string& dir, const std::string& file, const std::vector<ChunkSource>& sources,
                         CheckpointIndex& index, int64_t max_chunk_bytes = kMaxChunkBytes);

struct ReadReport {
  int64_t bytes_read = 0;
  int64_t chunks_read = 0;
};

// Fills every target from the checkpoint in dir: only the saved chunks that intersect a target
// are read, each once, and each is checked against its checksum first. The caller has checked that
// the index was written for the model and optimizer the targets belong to, so a tensor that is
// missing or has another shape or dtype is damage: CheckpointDamaged (naming the file), as for a
// file shorter than the index says or a chunk that fails its checksum.
ReadReport read_chunks(const std::string& dir, const CheckpointIndex& index, const std::vector<ChunkTarget>& targets);

// A small whole file of the checkpoint (trainer.json, vocab.txt) read and checked against its size
// and checksum in the index; CheckpointDamaged when it is missing or does not match.
std::string read_indexed_file(const std::string& dir, const CheckpointIndex& index, const std::string& name);

// Every chunk and every recorded file of the checkpoint checked; one line per problem (empty: good).
std::vector<std::string> verify_checkpoint(const std::string& dir, const CheckpointIndex& index);

}  // namespace dtrain
