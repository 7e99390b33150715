// Word-level vocabulary: counting, ordering, encoding, and the vocab.txt format.
#include "data/vocab.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "core/error.hpp"
#include "core/atomic_file.hpp"
#include "core/crc32c.hpp"
#include "data/io_util.hpp"
#include "data/token_file.hpp"

namespace dtrain {

namespace {

// Lower-case mapping for the two-byte UTF-8 range we handle; returns cp unchanged otherwise.
uint32_t lower_cp(uint32_t cp) {
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 0x20;        // Latin-1
  if ((cp >= 0x100 && cp <= 0x12F) || (cp >= 0x132 && cp <= 0x137) ||  // Latin Ext-A
      (cp >= 0x14A && cp <= 0x177))
    return (cp % 2 == 0) ? cp + 1 : cp;
  if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return (cp % 2 == 1) ? cp + 1 : cp;
  if (cp == 0x178) return 0xFF;
  if (cp == 0x386) return 0x3AC;  // Greek
  if (cp >= 0x388 && cp <= 0x38A) return cp + 0x25;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 0x3F;
  if ((cp >= 0x391 && cp <= 0x3A1) || (cp >= 0x3A3 && cp <= 0x3AB)) return cp + 0x20;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;  // Cyrillic
  if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;
  return cp;
}

bool may_change_case(std::string_view s) {
  for (unsigned char c : s)
    if ((c >= 'A' && c <= 'Z') || c >= 0x80) return true;
  return false;
}

std::string bad_vocab(const std::string& path, const std::string& what) {
  return "vocabulary file " + path + " " + what + ": regenerate it with `dtrain data prepare`";
}

}  // namespace

std::string lowercase_utf8(std::string_view s) {
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(out[i]);
    if (c >= 'A' && c <= 'Z') {
      out[i] = char(c + 32);
    } else if (c >= 0xC2 && c <= 0xDF && i + 1 < out.size() &&
               (static_cast<unsigned char>(out[i + 1]) & 0xC0) == 0x80) {
      uint32_t cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(out[i + 1]) & 0x3Fu);
      uint32_t lo = lower_cp(cp);
      out[i] = char(0xC0 | (lo >> 6));
      out[i + 1] = char(0x80 | (lo & 0x3F));
      ++i;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
Vocabulary::Vocabulary(bool lowercase, bool eos) : lowercase_(lowercase), eos_(eos) {
  add(std::string(kUnk), 0);
  if (eos_) add(std::string(kEos), 0);
}

uint32_t Vocabulary::add(std::string word, int64_t count) {
  uint32_t id = uint32_t(words_.size());
  auto [it, inserted] = index_.emplace(word, id);
  DT_ASSERT(inserted);
  words_.push_back(std::move(word));
  counts_.push_back(count);
  return id;
}

int64_t Vocabulary::find(std::string_view w) const {
  auto it = index_.find(w);
  return it == index_.end() ? -1 : int64_t(it->second);
}

Vocabulary Vocabulary::build(const std::vector<std::string>& lines, const VocabOptions& opts) {
  VocabBuilder b(opts);
  for (const auto& l : lines) b.add_line(l);
  return b.build();
}

uint32_t Vocabulary::id(std::string_view word) const {
  int64_t i = (lowercase_ && may_change_case(word)) ? find(lowercase_utf8(word)) : find(word);
  return i < 0 ? kUnkId : uint32_t(i);
}

int64_t Vocabulary::encode_line(std::string_view line, std::vector<uint32_t>& out) const {
  const int64_t words = encode_text(line, false, out);
  if (eos_ && words > 0) out.push_back(eos_id());
  return words > 0 && eos_ ? words + 1 : words;
}

int64_t Vocabulary::encode_text(std::string_view text, bool eos, std::vector<uint32_t>& out) const {
  size_t before = out.size();
  for_each_word(text, [&](std::string_view w) { out.push_back(id(w)); });
  if (eos_ && eos) out.push_back(eos_id());
  return int64_t(out.size() - before);
}

std::vector<uint32_t> Vocabulary::encode_line(std::string_view line) const {
  std::vector<uint32_t> out;
  encode_line(line, out);
  return out;
}

std::string Vocabulary::decode(std::span<const uint32_t> ids) const {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ' ';
    s += word(ids[i]);
  }
  return s;
}

const std::string& Vocabulary::word(uint32_t id) const {
  require(id < words_.size(), "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                  std::to_string(words_.size()) +
                                  " words: use the vocab.txt that the model was trained with");
  return words_[id];
}

int64_t Vocabulary::count(uint32_t id) const {
  word(id);  // range check
  return counts_[id];
}

uint32_t Vocabulary::eos_id() const {
  DT_ASSERT(eos_);
  return 1;
}

void Vocabulary::save(const std::string& path) const {
  AtomicFile w(path);
  w.write("dtrain-vocab 1 lower=" + std::string(lowercase_ ? "1" : "0") + " eos=" + (eos_ ? "1" : "0") + "\n");
  std::string line;
  for (size_t i = 0; i < words_.size(); ++i) {
    line.assign(words_[i]);
    line += '\t';
    line += std::to_string(counts_[i]);
    line += '\n';
    w.write(line);
  }
  w.commit();
}

Vocabulary Vocabulary::load(const std::string& path) {
  int64_t line_no = 0;
  bool have_header = false;
  Vocabulary v(false, false);
  v.words_.clear();
  v.counts_.clear();
  v.index_.clear();
  data_io::for_each_line(path, [&](std::string_view line) {
    ++line_no;
    if (!have_header) {
      bool lower = false, eos = false;
      if (line == "dtrain-vocab 1 lower=0 eos=0") {
      } else if (line == "dtrain-vocab 1 lower=1 eos=0") {
        lower = true;
      } else if (line == "dtrain-vocab 1 lower=0 eos=1") {
        eos = true;
      } else if (line == "dtrain-vocab 1 lower=1 eos=1") {
        lower = eos = true;
      } else {
        throw Error(
            bad_vocab(path, "has no valid header (first line should be `dtrain-vocab 1 lower=<0|1> eos=<0|1>`)"));
      }
      v.lowercase_ = lower;
      v.eos_ = eos;
      have_header = true;
      return;
    }
    size_t tab = line.find('\t');
    std::string where = "line " + std::to_string(line_no);
    if (tab == std::string_view::npos || tab == 0)
      throw Error(bad_vocab(path, where + " is malformed (expected word<TAB>count)"));
    std::string_view w = line.substr(0, tab), c = line.substr(tab + 1);
    bool ws = false;
    for_each_word(w, [&](std::string_view part) { ws = ws || part.size() != w.size(); });
    if (ws) throw Error(bad_vocab(path, where + " has a word with whitespace in it"));
    int64_t count = 0;
    auto [p, ec] = std::from_chars(c.data(), c.data() + c.size(), count);
    if (ec != std::errc() || p != c.data() + c.size() || count < 0)
      throw Error(
          bad_vocab(path, where + " has a bad count `" + std::string(c) + "` (expected a non-negative integer)"));
    if (v.index_.count(w)) throw Error(bad_vocab(path, where + " repeats the word `" + std::string(w) + "`"));
    size_t id = v.words_.size();
    if (id == 0 && w != kUnk) throw Error(bad_vocab(path, "must list <unk> first (" + where + ")"));
    if (id == 1 && v.eos_ && w != kEos)
      throw Error(bad_vocab(path, "must list <eos> second when eos=1 (" + where + ")"));
    if (id >= 0xFFFFFFFFull) throw Error(bad_vocab(path, "has too many words"));
    v.add(std::string(w), count);
  });
  if (!have_header) throw Error(bad_vocab(path, "is empty"));
  if (v.words_.empty() || (v.eos_ && v.words_.size() < 2))
    throw Error(bad_vocab(path, "lists no words (needs at least <unk>" + std::string(v.eos_ ? " and <eos>)" : ")")));
  return v;
}

// ---------------------------------------------------------------------------------------------
VocabBuilder::VocabBuilder(const VocabOptions& opts) : opts_(opts) {
  require(opts.min_freq >= 1, "vocabulary min_freq must be at least 1 (got " + std::to_string(opts.min_freq) +
                                  "): set data.min_freq to 1 or more");
  int64_t specials = opts.eos ? 2 : 1;
  require(opts.max_size == 0 || opts.max_size >= specials,
          "vocabulary max_size " + std::to_string(opts.max_size) +
              " leaves no room for the special tokens: use 0 (unlimited) or at least " + std::to_string(specials));
}

void VocabBuilder::add_line(std::string_view line) {
  if (count_words(line) > 0) count_eos();
}

void VocabBuilder::add_text(std::string_view text, bool eos) {
  count_words(text);
  if (eos) count_eos();
}

void VocabBuilder::count_eos() {
  if (!opts_.eos) return;
  ++eos_;
  ++tokens_;
}

int64_t VocabBuilder::count_words(std::string_view text) {
  int64_t words = 0;
  std::string lowered;
  for_each_word(text, [&](std::string_view w) {
    ++words;
    if (opts_.lowercase && may_change_case(w)) {
      lowered = lowercase_utf8(w);
      w = lowered;
    }
    if (w == Vocabulary::kUnk) {
      ++unk_;
    } else if (opts_.eos && w == Vocabulary::kEos) {
      ++eos_;
    } else {
      auto it = counts_.find(w);
      if (it == counts_.end())
        counts_.emplace(std::string(w), 1);
      else
        ++it->second;
    }
  });
  tokens_ += words;
  return words;
}

Vocabulary VocabBuilder::build() const {
  Vocabulary v(opts_.lowercase, opts_.eos);
  std::vector<std::pair<std::string_view, int64_t>> kept;
  int64_t unk = unk_;
  for (const auto& [w, c] : counts_) {
    if (c >= opts_.min_freq)
      kept.emplace_back(w, c);
    else
      unk += c;
  }
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (opts_.max_size > 0) {
    size_t room = size_t(opts_.max_size - v.size());
    for (size_t i = room; i < kept.size(); ++i) unk += kept[i].second;
    if (kept.size() > room) kept.resize(room);
  }
  require(kept.size() + size_t(v.size()) <= 0xFFFFFFFFull, "vocabulary has more than 2^32 words: set data.max_vocab");
  v.counts_[Vocabulary::kUnkId] = unk;
  if (opts_.eos) v.counts_[v.eos_id()] = eos_;
  for (const auto& [w, c] : kept) v.add(std::string(w), c);
  return v;
}

// ---------------------------------------------------------------------------------------------
bool check_vocab_matches(const std::string& vocab_path, std::initializer_list<const TokenFile*> token_files) {
  const std::string fix = ": run `dtrain data prepare` (or `dtrain data builtin`) again into that folder";
  std::error_code ec;
  require(std::filesystem::exists(vocab_path, ec), "vocabulary file " + vocab_path + " is missing (it belongs next to " +
                                                       (*token_files.begin())->path() + ")" + fix);
  const std::string bytes = read_file(vocab_path);
  const uint32_t crc = crc32c(bytes.data(), bytes.size());
  const int64_t words = Vocabulary::load(vocab_path).size();
  bool checked = true;
  for (const TokenFile* tokens : token_files) {
    require(words == int64_t(tokens->vocab_size()),
            "vocabulary file " + vocab_path + " lists " + std::to_string(words) + " words but " + tokens->path() +
                " was written for a vocabulary of " + std::to_string(tokens->vocab_size()) + fix +
                " to write them together");
    checked = checked && tokens->has_vocab_crc32c();
    require(!tokens->has_vocab_crc32c() || tokens->vocab_crc32c() == crc,
            "vocabulary file " + vocab_path + " is not the one " + tokens->path() + " was prepared with (its checksum "
            "differs: words were changed or swapped, or the file was replaced)" + fix + " to write them together");
  }
  return checked;
}

}  // namespace dtrain
