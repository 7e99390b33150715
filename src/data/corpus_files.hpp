// The files of a corpus given to `dtrain data prepare --tokenizer --input …`: folders expanded in a
// fixed order, each file's format (text, JSONL, HDF5) and compression, checked before any reading.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/byte_stream.hpp"

namespace dtrain {

enum class CorpusFormat { text, jsonl, hdf5 };

struct CorpusFile {
  std::string path;
  CorpusFormat format = CorpusFormat::text;
  Compression compression = Compression::none;
  uint64_t bytes = 0;  // its size on disk
};

// Every input in the order given, a folder replaced by its files (recursively, sorted by path byte by
// byte, hidden names skipped). The format comes from the name once .gz/.zst is taken off (.jsonl,
// .json, .ndjson: JSONL; .h5, .hdf5: HDF5; anything else: text) or from the HDF5 signature; the
// compression from the magic bytes. Error for an input that does not exist, an empty folder, or a
// compressed HDF5 file.
std::vector<CorpusFile> list_corpus_files(const std::vector<std::string>& inputs);

}  // namespace dtrain
