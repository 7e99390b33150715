// Corpus inputs expanded into files, each with its format and compression (see corpus_files.hpp).
#include "data/corpus_files.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& tail) { return s.ends_with(tail); }

// The name's extension once a compression extension is taken off, lower-cased.
std::string inner_extension(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* z : {".gz", ".zst", ".zstd"})
    if (ends_with(name, z)) {
      name.resize(name.size() - std::string(z).size());
      break;
    }
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(dot);
}

CorpusFile describe_file(const std::string& path) {
  CorpusFile f;
  f.path = path;
  std::error_code ec;
  f.bytes = uint64_t(fs::file_size(path, ec));
  f.compression = detect_compression(path);
  const std::string ext = inner_extension(fs::path(path).filename().string());
  if (ext == ".jsonl" || ext == ".json" || ext == ".ndjson") f.format = CorpusFormat::jsonl;
  if (ext == ".h5" || ext == ".hdf5" || has_hdf5_signature(path)) f.format = CorpusFormat::hdf5;
  require(f.format != CorpusFormat::hdf5 || f.compression == Compression::none,
          "input " + path + " is a compressed HDF5 file: decompress it first (HDF5 compresses inside the file)");
  return f;
}

// The regular files under a folder (symbolic links to files followed), hidden names skipped, sorted.
std::vector<std::string> files_under(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code ec2;
    if (name.starts_with(".")) {
      if (it->is_directory(ec2)) it.disable_recursion_pending();
      continue;
    }
    if (fs::is_regular_file(it->path(), ec2)) files.push_back(it->path().string());
  }
  require(!ec, "cannot list input folder " + dir + " (" + ec.message() + "): check its permissions");
  std::sort(files.begin(), files.end());
  require(!files.empty(), "input folder " + dir + " holds no files (hidden ones are skipped): give a folder of text, "
                          "JSONL or HDF5 files");
  return files;
}

}  // namespace

std::vector<CorpusFile> list_corpus_files(const std::vector<std::string>& inputs) {
  require(!inputs.empty(), "no input given: pass text, JSONL or HDF5 files (or folders of them) with --input");
  std::vector<CorpusFile> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(input, ec);
    require(fs::exists(st), "input " + input + " not found: check the path given to --input");
    if (fs::is_directory(st)) {
      for (const std::string& f : files_under(input)) files.push_back(describe_file(f));
    } else {
      require_regular_file(input, "input");
      files.push_back(describe_file(input));
    }
  }
  return files;
}

}  // namespace dtrain
