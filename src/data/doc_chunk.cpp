// Chunks filled piece by piece in input order (see doc_chunk.hpp).
#include "data/doc_chunk.hpp"

#include "core/error.hpp"

namespace dtrain {

int64_t chunk_budget_bytes() {
  return int64_t(kChunkTextBytes + kChunkPieces * sizeof(DocPiece) + kChunkReadyIds * 4 + kChunkTextBytes * 4);
}

void Chunk::clear() {
  index = 0;
  text.clear();
  ready_ids.clear();
  pieces.clear();
  ids.clear();
  if (ids.capacity() > kChunkTextBytes + kChunkReadyIds) std::vector<uint32_t>().swap(ids);
  error = nullptr;
  held_bytes = 0;
  input_done = 0;
}

Chunk& ChunkBuilder::room_for(size_t text_bytes, size_t ids) {
  DT_ASSERT(text_bytes <= kPieceBytes && ids <= kChunkReadyIds);
  if (chunk_ && (chunk_->text.size() + text_bytes > kChunkTextBytes || chunk_->pieces.size() == kChunkPieces ||
                 chunk_->ready_ids.size() + ids > kChunkReadyIds))
    queue_.push(std::move(chunk_));
  if (!chunk_) chunk_ = queue_.new_chunk();
  return *chunk_;
}

void ChunkBuilder::add_text(DocPiece piece, std::string_view text) {
  Chunk& c = room_for(text.size(), 0);
  piece.begin = c.text.size();
  c.text.append(text);
  piece.end = c.text.size();
  c.pieces.push_back(piece);
}

void ChunkBuilder::add_ids(DocPiece piece, std::span<const uint32_t> ids) {
  Chunk& c = room_for(0, ids.size());
  piece.kind = PieceKind::ids;
  piece.begin = c.ready_ids.size();
  c.ready_ids.insert(c.ready_ids.end(), ids.begin(), ids.end());
  piece.end = c.ready_ids.size();
  c.pieces.push_back(piece);
}

void ChunkBuilder::finish() {
  if (chunk_) queue_.push(std::move(chunk_));
}

}  // namespace dtrain
