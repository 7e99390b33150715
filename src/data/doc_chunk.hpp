// The unit of work of `dtrain data prepare --tokenizer`: a numbered chunk of document pieces (text, JSONL
// lines or ready ids) that the reader fills (ChunkBuilder), a worker encodes and the writer appends in order.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// A document longer than this is encoded in pieces (cut after a newline, at byte offsets that depend
// on its text alone). Fixed: the output depends on it. Small, as what a tokenizer allocates while it
// encodes grows with the text it is given at once (SentencePiece: about 100 bytes per byte).
inline constexpr size_t kPieceBytes = size_t(64) << 10;
inline constexpr size_t kChunkTextBytes = size_t(2) << 20;     // text a chunk holds at most
inline constexpr size_t kChunkPieces = 16384;                  // pieces a chunk holds at most
inline constexpr size_t kChunkReadyIds = kChunkTextBytes / 4;  // ready ids (HDF5) a chunk holds at most

enum class PieceKind : uint8_t {
  text,       // [begin, end) of Chunk::text
  json_line,  // [begin, end) of Chunk::text is a JSONL line; the document is its text key's value
  ids         // [begin, end) of Chunk::ready_ids: ids read from the input (HDF5)
};

struct DocPiece {
  uint64_t doc = 0;     // the document's index among all documents of the inputs, in order
  uint64_t begin = 0, end = 0;
  uint64_t ids_end = 0;  // set by the encoder: this piece's ids end here in Chunk::ids
  int64_t line = 0;     // the JSONL line number (from 1), 0 for other pieces
  uint32_t file = 0;    // index of the input file
  PieceKind kind = PieceKind::text;
  bool first = false, last = false;  // the document's first and last piece
};

struct Chunk {
  uint64_t index = 0;
  std::string text;
  std::vector<uint32_t> ready_ids;
  std::vector<DocPiece> pieces;
  std::vector<uint32_t> ids;  // the encoder's output, piece after piece
  std::exception_ptr error;   // the encoder's first failure (a bad JSONL line)
  int64_t held_bytes = 0;     // of the memory budget
  uint64_t input_done = 0;    // bytes of the input files read when the chunk was sent (progress)
  // Empty again, its buffers kept for the next chunk (ids past their budgeted size given back).
  void clear();
};

// Bytes of the memory budget one chunk holds from when the reader starts it until it is written: its
// text, pieces and ready ids, and its ids at up to one id per byte of text (more if they come out longer).
int64_t chunk_budget_bytes();

// Where the builder gets empty chunks (waiting for memory) and sends full ones.
class ChunkQueue {
 public:
  virtual ~ChunkQueue() = default;
  virtual std::unique_ptr<Chunk> new_chunk() = 0;
  virtual void push(std::unique_ptr<Chunk> chunk) = 0;
};

// Packs pieces into chunks in order: a piece that does not fit the current chunk starts the next.
class ChunkBuilder {
 public:
  explicit ChunkBuilder(ChunkQueue& queue) : queue_(queue) {}
  // `text` of at most kPieceBytes; `piece` says which document, file and line it is (begin/end are
  // set here).
  void add_text(DocPiece piece, std::string_view text);
  // At most kChunkReadyIds ids.
  void add_ids(DocPiece piece, std::span<const uint32_t> ids);
  // Sends the last chunk.
  void finish();

 private:
  Chunk& room_for(size_t text_bytes, size_t ids);
  ChunkQueue& queue_;
  std::unique_ptr<Chunk> chunk_;
};

}  // namespace dtrain
