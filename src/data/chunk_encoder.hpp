// A worker's job in `dtrain data prepare --tokenizer`: every piece of a chunk to token ids (text
// through the tokenizer, a JSONL line through its text key, ready ids as they are).
#pragma once
#include <string>
#include <vector>

#include "data/corpus_files.hpp"
#include "data/doc_chunk.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace dtrain {

struct ChunkEncoding {
  const Tokenizer* tokenizer = nullptr;
  SpecialText special = SpecialText::text;
  std::string text_key = "text";
  const std::vector<CorpusFile>* files = nullptr;  // named in the errors of JSONL lines
};

// Fills chunk.ids and each piece's ids_end. A JSONL line that is not a document throws Error naming
// its file and line.
void encode_chunk(Chunk& chunk, const ChunkEncoding& how);

}  // namespace dtrain
