// `dtrain data prepare`: reads WikiText-2 or plain text, builds the vocabulary from the train
// split, writes the binary token files and meta.txt; also makes the built-in offline corpus.
#include "data/prepare.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/atomic_file.hpp"
#include "core/crc32c.hpp"
#include "core/output_path.hpp"
#include "data/image_file.hpp"
#include "data/io_util.hpp"
#include "data/token_file.hpp"
#include "data/vocab.hpp"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

const char* const kSplits[3] = {"train", "valid", "test"};

void make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw Error("cannot create output folder " + dir + " (" + (ec ? ec.message() : "not a folder") +
                "): choose a writable output folder");
}

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// The text files of a plain-text input: the file itself, or the regular files of a folder
// (symlinks followed, each target once, hidden names skipped), sorted by name.
std::vector<std::string> plain_files(const std::string& input) {
  std::error_code ec;
  if (!fs::is_directory(input, ec)) return {input};
  std::vector<fs::path> names;
  for (const auto& e : fs::directory_iterator(input, ec)) {
    std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code ec2;
    if (fs::is_regular_file(e.path(), ec2)) names.push_back(e.path());
  }
  if (ec) throw Error("cannot list input folder " + input + " (" + ec.message() + "): check its permissions");
  std::sort(names.begin(), names.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const auto& p : names) {
    std::error_code ec2;
    fs::path canon = fs::canonical(p, ec2);
    if (!seen.insert(ec2 ? p.string() : canon.string()).second) continue;
    files.push_back(p.string());
  }
  require(!files.empty(), "input folder " + input +
                              " has no text files: put .txt files in it, or point --input at a WikiText-2 folder");
  return files;
}

constexpr size_t kBlockBytes = size_t(64) << 10;  // read size; the first block is also the binary test
constexpr size_t kMaxPiece = size_t(16) << 10;    // longer lines are handed out in pieces of at most this

// Throws when the start of `path` looks binary: a NUL byte, or more than 10% control bytes.
void reject_binary(const std::string& path, std::string_view head) {
  const std::string fix = ": pass UTF-8 text files with --input (convert UTF-16 text with iconv -f utf-16 -t utf-8)";
  const size_t nul = head.find('\0');
  if (nul != std::string_view::npos)
    throw Error("input " + path + " is a binary file, not text (a NUL byte at offset " + std::to_string(nul) + ")" +
                fix);
  size_t control = 0;
  for (unsigned char c : head) control += (c < 0x20 && !is_word_space(char(c))) || c == 0x7F;
  if (control * 10 > head.size())
    throw Error("input " + path + " is a binary file, not text (" + std::to_string(control) + " control bytes in its first " +
                std::to_string(head.size()) + " bytes)" + fix);
}

// At p[0..n), n > 0: the length of a valid UTF-8 sequence (> 0); minus the length of an invalid one
// (< 0: a bad lead byte, or a lead and its good continuation bytes before a bad one, each replaced by
// one U+FFFD); 0 when the data ends inside a sequence that is valid so far.
int utf8_step(const unsigned char* p, size_t n) {
  const unsigned c = p[0];
  if (c < 0x80) return 1;
  int len = 0;
  unsigned lo = 0x80, hi = 0xBF;  // range of the first continuation byte (no overlongs, surrogates, > U+10FFFF)
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int i = 1; i < len; ++i) {
    if (size_t(i) >= n) return 0;
    if (p[i] < lo || p[i] > hi) return -i;
    lo = 0x80;
    hi = 0xBF;
  }
  return len;
}

// Where a piece of at most kMaxPiece bytes ends in `s` (longer than that): after the last byte that
// leaves words whole, else (one giant word) at the last UTF-8 character start.
size_t cut_point(std::string_view s) {
  for (size_t i = kMaxPiece; i > 0; --i)
    if (is_word_space(s[i - 1]) || is_word_space(s[i])) return i;
  size_t i = kMaxPiece;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i > 0 ? i : kMaxPiece;
}

// Reads a text file in blocks and calls fn(piece, eos) for each line (newline removed), cutting
// lines longer than kMaxPiece bytes between words into several pieces; `eos` is true on the last
// piece of a line that has a word. Throws Error for binary files. Invalid UTF-8 becomes U+FFFD, one
// per invalid sequence, counted in `report` when given.
void for_each_piece(const std::string& path, const std::function<void(std::string_view, bool)>& fn,
                    PrepareReport* report) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Error("cannot read " + path + ": it is a folder, not a text file; pass a file or a folder of text files");
  require_regular_file(path, "text file");  // a pipe would block forever, a device never end
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path + " (" + std::strerror(errno) + "): check that the file exists and is readable");
  std::vector<char> block(kBlockBytes);
  std::string raw;   // bytes not decoded yet: a sequence cut by the end of the previous block
  std::string text;  // decoded text not handed out yet
  int64_t raw_offset = 0;  // file offset of raw[0]
  bool line_has_word = false;
  auto hand_out = [&](std::string_view piece, bool line_end) {
    if (!line_has_word)
      for (char c : piece)
        if (!is_word_space(c)) {
          line_has_word = true;
          break;
        }
    fn(piece, line_end && line_has_word);
    if (line_end) line_has_word = false;
  };
  for (bool first = true;; first = false) {
    in.read(block.data(), std::streamsize(block.size()));
    const size_t got = size_t(in.gcount());
    if (in.bad())
      throw Error("error while reading " + path + " (" + std::strerror(errno) + "): check the file and the disk it is on");
    const bool eof = got < block.size();
    if (first) reject_binary(path, std::string_view(block.data(), got));
    raw.append(block.data(), got);
    size_t i = 0;
    while (i < raw.size()) {
      size_t j = i;
      while (j < raw.size() && static_cast<unsigned char>(raw[j]) < 0x80) ++j;
      text.append(raw, i, j - i);
      i = j;
      if (i == raw.size()) break;
      const int step = utf8_step(reinterpret_cast<const unsigned char*>(raw.data()) + i, raw.size() - i);
      if (step == 0 && !eof) break;  // the rest comes with the next block
      if (step > 0) {
        text.append(raw, i, size_t(step));
        i += size_t(step);
        continue;
      }
      text += "\xEF\xBF\xBD";  // U+FFFD
      if (report && report->invalid_utf8++ == 0) {
        report->invalid_utf8_file = path;
        report->invalid_utf8_offset = raw_offset + int64_t(i);
      }
      i += step < 0 ? size_t(-step) : raw.size() - i;
    }
    raw.erase(0, i);
    raw_offset += int64_t(i);
    // Hand out the complete lines, and pieces of a long unfinished one.
    size_t pos = 0;  // text[0, pos) is handed out
    for (;;) {
      const size_t nl = text.find('\n', pos);
      const size_t end = nl == std::string::npos ? text.size() : nl;
      while (end - pos > kMaxPiece) {
        const std::string_view line(text.data() + pos, end - pos);
        const size_t cut = cut_point(line);
        hand_out(line.substr(0, cut), false);
        pos += cut;
      }
      if (nl == std::string::npos && (!eof || pos == text.size())) break;  // unfinished, or no last line
      std::string_view line(text.data() + pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      hand_out(line, true);
      pos = nl == std::string::npos ? text.size() : nl + 1;
    }
    text.erase(0, pos);
    if (eof) break;
  }
}

// Largest paragraph start p with 0 < p <= target that moves the cut back by at most `slack`
// lines; otherwise the plain line cut `target`.
int64_t snap_cut(const std::vector<int64_t>& para_starts, int64_t target, int64_t slack) {
  target = std::max<int64_t>(target, 0);
  if (slack == 0) return target;
  auto it = std::upper_bound(para_starts.begin(), para_starts.end(), target);
  if (it == para_starts.begin()) return target;
  int64_t p = *std::prev(it);
  return (p > 0 && target - p <= slack) ? p : target;
}

void write_meta(const std::string& path, const PrepareOptions& o, const PrepareReport& r) {
  std::string s;
  auto kv = [&](const std::string& k, const std::string& v) { s += k + "=" + v + "\n"; };
  kv("format", "dtrain-data 1");
  kv("source", o.input);
  kv("input_format", r.format);
  kv("vocab_size", std::to_string(r.vocab_size));
  kv("train_tokens", std::to_string(r.train_tokens));
  kv("valid_tokens", std::to_string(r.valid_tokens));
  kv("test_tokens", std::to_string(r.test_tokens));
  kv("train_unk", std::to_string(r.train_unk));
  kv("invalid_utf8", std::to_string(r.invalid_utf8));
  kv("lowercase", o.lowercase ? "1" : "0");
  kv("eos", o.eos ? "1" : "0");
  kv("min_freq", std::to_string(o.min_freq));
  kv("max_vocab", std::to_string(o.max_vocab));
  AtomicFile w(path);
  w.write(s);
  w.commit();
}

}  // namespace

std::optional<SplitFiles> find_split_files(const std::string& dir) {
  const char* const patterns[3][2] = {{"wiki.", ".tokens"}, {"wiki.", ".raw"}, {"", ".txt"}};
  for (const auto& pat : patterns) {
    std::string names[3];
    bool present[3];
    int n_present = 0;
    for (int s = 0; s < 3; ++s) {
      names[s] = std::string(pat[0]) + kSplits[s] + pat[1];
      present[s] = path_exists(fs::path(dir) / names[s]);
      n_present += present[s];
    }
    if (n_present == 0) continue;
    for (int s = 0; s < 3; ++s) {
      if (!present[s]) {
        int have = present[0] ? 0 : present[1] ? 1 : 2;
        throw Error(
            "data folder " + dir + " has " + names[have] + " but no " + names[s] +
            ": add the missing split, or put the text in files with other names to have it split automatically");
      }
    }
    return SplitFiles{(fs::path(dir) / names[0]).string(), (fs::path(dir) / names[1]).string(),
                      (fs::path(dir) / names[2]).string()};
  }
  return std::nullopt;
}

namespace {

// Each split's token ids: [0] train, [1] valid, [2] test.
using SplitIds = std::array<std::vector<uint32_t>, 3>;

// The options and the folders checked before anything is read.
void check_text_request(const PrepareOptions& o) {
  require(!o.input.empty(),
          "no input given: pass a WikiText-2 folder, a text file or a folder of text files with --input");
  require(!o.out_dir.empty(), "no output folder given: pass one with --out");
  require(
      path_exists(o.input),
      "input " + o.input + " not found: pass a WikiText-2 folder, a text file or a folder of text files with --input");
  require(o.valid_fraction >= 0 && o.test_fraction >= 0 && o.valid_fraction + o.test_fraction < 1,
          "--valid-fraction and --test-fraction must be >= 0 with a sum below 1 (got " +
              std::to_string(o.valid_fraction) + " and " + std::to_string(o.test_fraction) +
              "): fix the split fractions");
  {
    std::error_code ec1, ec2;
    if (fs::is_directory(o.input, ec1) && fs::equivalent(o.input, o.out_dir, ec2))
      throw Error("output folder " + o.out_dir + " is the input folder: write the prepared data to another folder");
  }
  require(!is_image_meta((fs::path(o.out_dir) / "meta.json").string()),
          "output folder " + o.out_dir + " holds image data (meta.json): prepare the text into another folder");
  check_text_output(o.out_dir);
}

// WikiText-style split files: the vocabulary from train, then every split encoded.
Vocabulary encode_split_files(const SplitFiles& splits, VocabBuilder& builder, SplitIds& ids, PrepareReport& r) {
  const std::string files[3] = {splits.train, splits.valid, splits.test};
  for_each_piece(files[0], [&](std::string_view t, bool eos) { builder.add_text(t, eos); }, nullptr);
  require(builder.tokens() > 0,
          "train split " + files[0] + " has no tokens: point --input at a folder with a non-empty train split");
  Vocabulary vocab = builder.build();
  for (int s = 0; s < 3; ++s)
    for_each_piece(files[s], [&](std::string_view t, bool eos) { vocab.encode_text(t, eos, ids[s]); }, &r);
  return vocab;
}

// Where plain text is cut: lines before valid_cut are train, before test_cut valid, the rest test.
struct LineCuts {
  int64_t lines = 0, valid_cut = 0, test_cut = 0;
  int split_of(int64_t line) const { return line < valid_cut ? 0 : line < test_cut ? 1 : 2; }
};

// Pass 1 over plain text: line count and paragraph starts (a file start also starts a paragraph),
// and the cuts snapped back to a paragraph start where one is near. Here and below, a line longer
// than kMaxPiece counts as its pieces, so that it can be split too.
LineCuts cut_lines(const std::vector<std::string>& files, const PrepareOptions& o, PrepareReport& r) {
  int64_t n_lines = 0;
  std::vector<int64_t> para_starts;
  for (const auto& f : files) {
    bool prev_blank = true;
    for_each_piece(
        f,
        [&](std::string_view l, bool) {
          bool blank = data_io::is_blank(l);
          if (!blank && prev_blank) para_starts.push_back(n_lines);
          prev_blank = blank;
          ++n_lines;
        },
        &r);
  }
  const int64_t n_test = o.test_fraction > 0 ? int64_t(std::ceil(double(n_lines) * o.test_fraction)) : 0;
  const int64_t test_cut = snap_cut(para_starts, n_lines - n_test, n_test);
  const int64_t n_valid = o.valid_fraction > 0 ? int64_t(std::ceil(double(n_lines) * o.valid_fraction)) : 0;
  const int64_t valid_cut = snap_cut(para_starts, test_cut - n_valid, n_valid);
  return {n_lines, valid_cut, test_cut};
}

// Plain text, split by lines: pass 2 counts the train lines into the vocabulary, pass 3 encodes
// every line into its split.
Vocabulary encode_plain_text(const PrepareOptions& o, VocabBuilder& builder, SplitIds& ids, PrepareReport& r) {
  const std::vector<std::string> files = plain_files(o.input);
  const LineCuts cuts = cut_lines(files, o, r);
  int64_t line = 0;
  for (const auto& f : files)
    for_each_piece(
        f,
        [&](std::string_view t, bool eos) {
          if (cuts.split_of(line++) == 0) builder.add_text(t, eos);
        },
        nullptr);
  require(builder.tokens() > 0, "input " + o.input + " gives an empty train split (no tokens in the first " +
                                    std::to_string(cuts.valid_cut) + " of " + std::to_string(cuts.lines) +
                                    " lines): add text or lower --valid-fraction/--test-fraction");
  Vocabulary vocab = builder.build();
  line = 0;
  for (const auto& f : files)
    for_each_piece(
        f, [&](std::string_view t, bool eos) { vocab.encode_text(t, eos, ids[cuts.split_of(line++)]); }, nullptr);
  return vocab;
}

// vocab.txt, the token files (each with the checksum of the vocabulary as saved) and meta.txt.
void write_prepared_text(const PrepareOptions& o, const Vocabulary& vocab, const SplitIds& ids,
                         const PrepareReport& r) {
  make_dir(o.out_dir);
  const fs::path out(o.out_dir);
  vocab.save((out / "vocab.txt").string());
  const std::string vocab_bytes = read_file((out / "vocab.txt").string());  // what the ids index, as saved
  const uint32_t vocab_crc = crc32c(vocab_bytes.data(), vocab_bytes.size());
  for (int s = 0; s < 3; ++s)
    write_token_file((out / (std::string(kSplits[s]) + ".bin")).string(), uint32_t(vocab.size()), ids[s], vocab_crc);
  write_meta((out / "meta.txt").string(), o, r);
}

}  // namespace

PrepareReport prepare_dataset(const PrepareOptions& o) {
  check_text_request(o);
  VocabOptions vo;
  vo.lowercase = o.lowercase;
  vo.eos = o.eos;
  vo.min_freq = o.min_freq;
  vo.max_size = o.max_vocab;
  VocabBuilder builder(vo);  // validates min_freq / max_vocab before any reading

  PrepareReport r;
  SplitIds ids;
  std::optional<SplitFiles> splits;
  {
    std::error_code ec;
    if (fs::is_directory(o.input, ec)) splits = find_split_files(o.input);
  }
  r.format = splits ? "wikitext" : "plain";
  const Vocabulary vocab =
      splits ? encode_split_files(*splits, builder, ids, r) : encode_plain_text(o, builder, ids, r);

  r.vocab_size = vocab.size();
  r.train_tokens = int64_t(ids[0].size());
  r.valid_tokens = int64_t(ids[1].size());
  r.test_tokens = int64_t(ids[2].size());
  r.train_unk = std::count(ids[0].begin(), ids[0].end(), Vocabulary::kUnkId);
  write_prepared_text(o, vocab, ids, r);
  return r;
}

std::map<std::string, std::string> read_meta(const std::string& path) {
  std::map<std::string, std::string> kv;
  int64_t line_no = 0;
  data_io::for_each_line(path, [&](std::string_view l) {
    ++line_no;
    if (data_io::is_blank(l) || l[0] == '#') return;
    size_t eq = l.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw Error("meta file " + path + " line " + std::to_string(line_no) +
                  " is malformed (expected key=value): run `dtrain data prepare` again");
    kv[std::string(l.substr(0, eq))] = std::string(l.substr(eq + 1));
  });
  return kv;
}

void check_text_output(const std::string& out_dir) {
  check_output_folder(out_dir, "dtrain data prepare", holds_only({"vocab.txt", "train.bin", "valid.bin", "test.bin",
                                                                  "meta.txt", "text", "text/*.txt"}));
}

void make_builtin_corpus(const std::string& out_dir, const std::string& source_dir) {
  const std::string fix = ": pass your own text with `dtrain data prepare --input DIR`";
  std::error_code ec;
  require(fs::is_directory(source_dir, ec), "built-in corpus source " + source_dir + " not found" + fix);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(source_dir, ec)) {
    std::error_code ec2;
    auto st = fs::symlink_status(e.path(), ec2);
    if (!ec2 && fs::is_regular_file(st)) files.push_back(e.path());
  }
  require(!ec, "cannot list built-in corpus source " + source_dir + " (" + ec.message() + ")" + fix);
  require(!files.empty(), "built-in corpus source " + source_dir + " is empty" + fix);
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });

  std::string out[3];
  int64_t n_para = 0;
  std::string para;
  auto flush = [&]() {
    if (para.empty()) return;
    int s = n_para % 10 == 8 ? 1 : n_para % 10 == 9 ? 2 : 0;
    out[s] += para;
    out[s] += '\n';
    para.clear();
    ++n_para;
  };
  for (const auto& f : files) {
    data_io::for_each_line(f.string(), [&](std::string_view l) {
      if (data_io::is_blank(l)) {
        flush();
      } else {
        para.append(l);
        para += '\n';
      }
    });
    flush();
  }
  require(!out[0].empty() && !out[1].empty() && !out[2].empty(), "built-in corpus source " + source_dir +
                                                                     " has too little text (" + std::to_string(n_para) +
                                                                     " paragraphs, need at least 10)" + fix);
  make_dir(out_dir);
  for (int s = 0; s < 3; ++s) {
    AtomicFile w((fs::path(out_dir) / (std::string(kSplits[s]) + ".txt")).string());
    w.write(out[s]);
    w.commit();
  }
}

}  // namespace dtrain
