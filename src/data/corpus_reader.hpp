// The reader of `dtrain data prepare --tokenizer`: every corpus file in order, cut into documents and their
// pieces (which depend on the input bytes and kPieceBytes alone), packed into chunks (doc_chunk.hpp).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus_files.hpp"
#include "data/doc_chunk.hpp"
#include "data/memory_budget.hpp"

namespace dtrain {

struct CorpusReadOptions {
  bool docs_by_line = false;   // text: each non-blank line a document (else a file is one)
  std::string text_key = "text";  // JSONL
  std::string dataset;         // HDF5
  int64_t vocab_size = 0;      // ids of an HDF5 integer dataset must be below it
  std::string tokenizer_path;  // named when an id is not
};

// What the reader shares while it reads file after file.
struct CorpusCursor {
  ChunkBuilder& out;
  MemoryBudget& budget;               // a JSONL line longer than a piece is held under it
  std::atomic<uint64_t>& consumed;    // bytes of the input files read so far (progress)
  uint64_t next_doc = 0;              // the index the next document gets
  uint64_t files_done_bytes = 0;      // sizes of the files read to their end
};

// Reads every file in order into cursor.out.
void read_corpus(const std::vector<CorpusFile>& files, const CorpusReadOptions& options, CorpusCursor& cursor);

// One file of each format (called by read_corpus; `index` is the file's place in the list).
void read_text_file(const CorpusFile& file, uint32_t index, const CorpusReadOptions& options, CorpusCursor& cursor);
void read_jsonl_file(const CorpusFile& file, uint32_t index, const CorpusReadOptions& options, CorpusCursor& cursor);
void read_hdf5_file(const CorpusFile& file, uint32_t index, const CorpusReadOptions& options, CorpusCursor& cursor);

// Where the first piece of `text` (longer than kPieceBytes) ends: after its last newline within the
// first kPieceBytes bytes; else before its last ASCII space there; else at the start of the last
// UTF-8 character that fits.
size_t piece_cut(std::string_view text);
// Adds a whole document's text to the chunks, in pieces of at most kPieceBytes cut by piece_cut.
void add_document_text(CorpusCursor& cursor, uint32_t file, int64_t line, std::string_view text);

}  // namespace dtrain
