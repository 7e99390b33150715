// Chunks of document pieces to token ids (see chunk_encoder.hpp).
#include "data/chunk_encoder.hpp"

#include "data/json_document.hpp"

namespace dtrain {

void encode_chunk(Chunk& c, const ChunkEncoding& how) {
  c.ids.reserve(c.text.size() + c.ready_ids.size());  // one id per byte of text at most, as budgeted
  for (DocPiece& p : c.pieces) {
    const std::string_view text =
        p.kind == PieceKind::ids ? std::string_view() : std::string_view(c.text).substr(p.begin, p.end - p.begin);
    switch (p.kind) {
      case PieceKind::text:
        how.tokenizer->encode(text, c.ids, how.special);
        break;
      case PieceKind::json_line:
        with_json_document(text, how.text_key, (*how.files)[p.file].path, p.line,
                           [&](std::string_view doc) { how.tokenizer->encode(doc, c.ids, how.special); });
        break;
      case PieceKind::ids:
        c.ids.insert(c.ids.end(), c.ready_ids.begin() + int64_t(p.begin), c.ready_ids.begin() + int64_t(p.end));
        break;
    }
    p.ids_end = c.ids.size();
  }
}

}  // namespace dtrain
