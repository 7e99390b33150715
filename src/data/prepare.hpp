// `dtrain data prepare`: turns a WikiText-2 folder or plain text into vocab.txt, {train,valid,test}.bin
// and meta.txt; also makes the built-in offline corpus from Debian's licence texts.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace dtrain {

struct PrepareOptions {
  std::string input;    // WikiText-2 folder, a text file, or a folder of text files
  std::string out_dir;  // created when missing
  bool lowercase = true;
  bool eos = true;
  int min_freq = 1;
  int64_t max_vocab = 0;                             // 0 = unlimited; counts <unk> and <eos>
  double valid_fraction = 0.1, test_fraction = 0.1;  // plain text only
};

struct PrepareReport {
  std::string format;  // "wikitext" (ready-made splits) or "plain" (split here)
  int64_t vocab_size = 0;
  int64_t train_tokens = 0;
  int64_t valid_tokens = 0;
  int64_t test_tokens = 0;
  int64_t train_unk = 0;  // train tokens that map to <unk>
  // Invalid UTF-8 sequences in the input, each read as U+FFFD; where the first one is.
  int64_t invalid_utf8 = 0;
  std::string invalid_utf8_file;
  int64_t invalid_utf8_offset = -1;
};

// The three split files of a folder that holds ready-made splits.
struct SplitFiles {
  std::string train, valid, test;
};

// Looks in `dir` for wiki.{train,valid,test}.tokens, wiki.{...}.raw or {train,valid,test}.txt.
// Returns nullopt when none of those names is there; throws Error when a set is incomplete.
std::optional<SplitFiles> find_split_files(const std::string& dir);

// Writes out_dir/vocab.txt, out_dir/{train,valid,test}.bin and, last, out_dir/meta.txt.
// Input text is UTF-8: a file whose first 64 KiB hold a NUL byte or over 10% control bytes is
// rejected as binary; each invalid UTF-8 sequence is read as U+FFFD and counted in the report.
// Lines may be of any length (longer ones are read in pieces, cut between words).
// Refuses an output folder that holds anything but an earlier text preparation (check_output_folder).
PrepareReport prepare_dataset(const PrepareOptions& opts);

// Checks that out_dir may receive prepared text (and `data builtin`'s text/): see check_output_folder.
void check_text_output(const std::string& out_dir);

// Reads a key=value file such as meta.txt (blank lines and lines starting with '#' ignored).
std::map<std::string, std::string> read_meta(const std::string& path);

// Writes out_dir/{train,valid,test}.txt from the regular files (not symlinks) of `source_dir`,
// sorted by name: paragraph i (blank-line separated, counted over all files) goes to valid when
// i % 10 == 8, to test when i % 10 == 9, else to train.
void make_builtin_corpus(const std::string& out_dir, const std::string& source_dir = "/usr/share/common-licenses");

}  // namespace dtrain
