// Tokenizer::load: which kind a tokenizer file is, told by its first bytes.
#include "data/tokenizer/tokenizer.hpp"

#include <cctype>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "data/tokenizer/kinds.hpp"

namespace dtrain {

SpecialText parse_special_text(const std::string& value) {
  if (value == "text") return SpecialText::text;
  if (value == "special") return SpecialText::special;
  throw Error("--special-tokens " + value + ": use text (a special token's spelling is plain text, the default) or "
              "special (it becomes the special token's id)");
}

namespace {

// Whether the first line is `BASE64 RANK`: a tiktoken rank file.
bool looks_like_tiktoken(const std::string& bytes) {
  const size_t end = bytes.find('\n');
  const std::string_view line(bytes.data(), end == std::string::npos ? bytes.size() : end);
  const size_t space = line.find(' ');
  if (space == 0 || space == std::string_view::npos || space + 1 >= line.size()) return false;
  for (size_t i = 0; i < space; ++i) {
    const char c = line[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && c != '=') return false;
  }
  for (size_t i = space + 1; i < line.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(line[i])) && !(line[i] == '\r' && i + 1 == line.size())) return false;
  return true;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  const std::string bytes = read_file(path, int64_t(1) << 30, "tokenizer file");
  require(!bytes.empty(), "tokenizer file " + path + " is empty: give a tokenizer.model (SentencePiece or tiktoken), "
                          "a tokenizer.json or a dtrain vocab.txt");
  if (bytes.starts_with("dtrain-vocab ")) return load_word_tokenizer(path);
  size_t first = 0;
  while (first < bytes.size() && std::isspace(static_cast<unsigned char>(bytes[first]))) ++first;
  if (first < bytes.size() && bytes[first] == '{') return load_tokenizer_json(path, bytes);
  if (looks_like_tiktoken(bytes)) return load_tiktoken(path, bytes);
  return load_sentencepiece(path, bytes);
}

}  // namespace dtrain
