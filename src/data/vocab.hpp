// Word-level vocabulary built from the train split (whitespace split, optional lower-casing and
// <eos>), saved as a text file that carries its tokenisation rules with it.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dtrain {

class TokenFile;

struct VocabOptions {
  bool lowercase = true;  // lower-case words before counting and encoding
  bool eos = true;        // append <eos> after every line that has at least one word
  int64_t min_freq = 1;   // words seen fewer times in the train split map to <unk>
  int64_t max_size = 0;   // total size including <unk> and <eos>; 0 = unlimited
};

// Lower-cases ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic letters in UTF-8 text; other
// bytes pass through unchanged.
std::string lowercase_utf8(std::string_view s);

// What separates words: ASCII white space.
inline bool is_word_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Calls fn(word) for every maximal run of non-whitespace bytes (ASCII whitespace) in `line`.
template <class F>
void for_each_word(std::string_view line, F&& fn) {
  size_t i = 0, n = line.size();
  while (i < n) {
    while (i < n && is_word_space(line[i])) ++i;
    size_t j = i;
    while (j < n && !is_word_space(line[j])) ++j;
    if (j > i) fn(line.substr(i, j - i));
    i = j;
  }
}

class Vocabulary {
 public:
  static constexpr uint32_t kUnkId = 0;
  static constexpr std::string_view kUnk = "<unk>";
  static constexpr std::string_view kEos = "<eos>";

  // Holds only the special tokens: <unk> (id 0), then <eos> (id 1) when `eos`.
  explicit Vocabulary(bool lowercase = true, bool eos = true);

  // Counts the words of `lines` (the train split) and builds the vocabulary: <unk>, <eos>, then
  // words by descending count, ties in byte order.
  static Vocabulary build(const std::vector<std::string>& lines, const VocabOptions& opts = {});

  // Appends the ids of `line` (plus <eos> when enabled and the line has a word) to `out`;
  // returns how many were appended.
  int64_t encode_line(std::string_view line, std::vector<uint32_t>& out) const;
  // Same for a piece of a line: <eos> follows (when enabled) only when `eos` is true.
  int64_t encode_text(std::string_view text, bool eos, std::vector<uint32_t>& out) const;
  std::vector<uint32_t> encode_line(std::string_view line) const;
  // Words joined by single spaces (<eos> included as a word).
  std::string decode(std::span<const uint32_t> ids) const;

  // Id of `word` after this vocabulary's normalisation (lower-casing); unknown words give 0.
  uint32_t id(std::string_view word) const;
  // Throws Error when `id` is outside the vocabulary.
  const std::string& word(uint32_t id) const;
  // Occurrences in the train split (for <unk>: all train tokens mapped to it).
  int64_t count(uint32_t id) const;
  int64_t size() const { return int64_t(words_.size()); }

  bool lowercase() const { return lowercase_; }
  bool has_eos() const { return eos_; }
  uint32_t eos_id() const;  // 1; only valid when has_eos()

  // Text file: header `dtrain-vocab 1 lower=<0|1> eos=<0|1>`, then `word<TAB>count` per id.
  void save(const std::string& path) const;
  static Vocabulary load(const std::string& path);

 private:
  friend class VocabBuilder;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  uint32_t add(std::string word, int64_t count);
  // Looks up an already-normalised word; returns -1 when absent.
  int64_t find(std::string_view normalised) const;

  bool lowercase_;
  bool eos_;
  std::vector<std::string> words_;
  std::vector<int64_t> counts_;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> index_;
};

// Streaming counterpart of Vocabulary::build: feed the train split line by line.
class VocabBuilder {
 public:
  explicit VocabBuilder(const VocabOptions& opts = {});
  void add_line(std::string_view line);
  // Same for a piece of a line: counts one <eos> (when enabled) only when `eos` is true.
  void add_text(std::string_view text, bool eos);
  // Tokens counted so far (words plus <eos> markers).
  int64_t tokens() const { return tokens_; }
  Vocabulary build() const;

 private:
  VocabOptions opts_;
  std::unordered_map<std::string, int64_t, Vocabulary::Hash, std::equal_to<>> counts_;
  int64_t unk_ = 0;
  int64_t eos_ = 0;
  int64_t tokens_ = 0;
  int64_t count_words(std::string_view text);  // counts a piece's words; returns how many
  void count_eos();                            // one <eos> marker, when enabled
};

// Checks that the vocab.txt of a prepared data folder is the one its token files index (read once
// for all of them): throws Error naming both files and the fix when `vocab_path` is missing or
// malformed, lists another number of words than the vocabulary size recorded in one of them, or
// (token files that record the vocabulary's checksum) has other bytes: words changed or swapped.
// Returns whether every token file recorded the checksum (files of older dtrain versions do not).
bool check_vocab_matches(const std::string& vocab_path, std::initializer_list<const TokenFile*> token_files);

}  // namespace dtrain
