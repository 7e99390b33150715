// tiktoken rank files (`base64(token bytes) rank` per line: GPT-2, cl100k_base, o200k_base, Llama 3's
// tokenizer.model): the ranks, checked line by line, and the regex and special tokens of the known
// encoding their number names. A token's rank is its id, and a pair of tokens merges (at that rank)
// when their concatenation has one.
#include <cstdio>
#include <optional>

#include "core/error.hpp"
#include "data/tokenizer/bpe_encodings.hpp"
#include "data/tokenizer/byte_level_bpe.hpp"
#include "data/tokenizer/kinds.hpp"

namespace dtrain {

namespace {

// Standard base64 (with '=' padding, as tiktoken writes it); nullopt when `text` is not.
std::optional<std::string> decode_base64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  auto value_of = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  const size_t padding = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
  std::string bytes;
  uint32_t bits = 0;
  int held = 0;  // bits held in `bits`
  for (size_t i = 0; i < text.size() - padding; ++i) {
    const int v = value_of(text[i]);
    if (v < 0) return std::nullopt;
    bits = bits << 6 | uint32_t(v);
    held += 6;
    if (held >= 8) {
      held -= 8;
      bytes += char((bits >> held) & 0xFF);
    }
  }
  if ((bits & ((1u << held) - 1)) != 0) return std::nullopt;  // bits past the last byte must be zero
  return bytes;
}

[[noreturn]] void refuse_line(const std::string& path, size_t line, const std::string& what) {
  throw Error("tokenizer " + path + " line " + std::to_string(line) + ": " + what);
}

// `base64 rank` on line `number`: the token's bytes and its rank.
std::pair<std::string, uint64_t> parse_rank_line(std::string_view line, size_t number, const std::string& path) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
    refuse_line(path, number, "expected `BASE64 RANK` (a tiktoken rank file)");
  std::optional<std::string> bytes = decode_base64(line.substr(0, space));
  if (!bytes) refuse_line(path, number, std::string(line.substr(0, space)) + " is not base64");
  const std::string_view digits = line.substr(space + 1);
  uint64_t rank = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9' || rank > (uint64_t(1) << 32)) refuse_line(path, number, "the rank is not a number below 2^32");
    rank = rank * 10 + uint64_t(c - '0');
  }
  if (digits.empty()) refuse_line(path, number, "the rank is missing");
  return {std::move(*bytes), rank};
}

// The bytes of each rank. Ranks run from 0 to n-1 (n the file's lines), each once, each token once.
std::vector<std::string> read_ranks(const std::string& path, const std::string& text) {
  std::vector<std::pair<std::string, uint64_t>> entries;
  std::vector<size_t> line_of_entry;
  size_t number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    if (line.ends_with('\r')) line.remove_suffix(1);
    ++number;
    if (!line.empty()) {  // tiktoken skips empty lines too
      entries.push_back(parse_rank_line(line, number, path));
      line_of_entry.push_back(number);
    }
    start = end + 1;
  }
  std::vector<std::string> bytes_of_rank(entries.size());
  std::vector<size_t> line_of_rank(entries.size(), 0);
  std::unordered_map<std::string_view, size_t> line_of_token;
  for (size_t i = 0; i < entries.size(); ++i) {
    const uint64_t rank = entries[i].second;
    if (rank >= entries.size())
      refuse_line(path, line_of_entry[i], "rank " + std::to_string(rank) + " is not below the file's " +
                                              std::to_string(entries.size()) + " ranks (they run from 0 to n-1)");
    if (line_of_rank[rank] != 0)
      refuse_line(path, line_of_entry[i], "rank " + std::to_string(rank) + " is given twice (line " +
                                              std::to_string(line_of_rank[rank]) + " has it too)");
    line_of_rank[rank] = line_of_entry[i];
    bytes_of_rank[rank] = std::move(entries[i].first);
    const auto [seen, fresh] = line_of_token.emplace(bytes_of_rank[rank], line_of_entry[i]);
    if (!fresh) refuse_line(path, line_of_entry[i], "the same token as line " + std::to_string(seen->second));
  }
  return bytes_of_rank;
}

// Every pair of tokens whose concatenation is a token merges into it, at its rank.
PairMergeTable merges_of_ranks(const std::vector<std::string>& bytes_of_rank) {
  std::unordered_map<std::string_view, uint32_t> rank_of;
  rank_of.reserve(bytes_of_rank.size());
  for (size_t r = 0; r < bytes_of_rank.size(); ++r) rank_of.emplace(bytes_of_rank[r], uint32_t(r));
  PairMergeTable merges;
  for (size_t r = 0; r < bytes_of_rank.size(); ++r) {
    const std::string_view token = bytes_of_rank[r];
    for (size_t cut = 1; cut < token.size(); ++cut) {
      const auto left = rank_of.find(token.substr(0, cut));
      if (left == rank_of.end()) continue;
      const auto right = rank_of.find(token.substr(cut));
      if (right != rank_of.end()) merges.set(left->second, right->second, {uint32_t(r), uint32_t(r)});
    }
  }
  return merges;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tiktoken(const std::string& path, const std::string& text) {
  std::vector<std::string> bytes_of_rank = read_ranks(path, text);
  const BpeEncoding* encoding = bpe_encoding_of_size(bytes_of_rank.size());
  if (!encoding)
    throw Error("tokenizer " + path + ": a tiktoken rank file of " + std::to_string(bytes_of_rank.size()) +
                " ranks is not an encoding dtrain knows (it knows those of " + known_bpe_encoding_sizes() +
                " ranks): a rank file does not say its pre-tokenizer regex or special tokens, which dtrain takes "
                "from its size; for another encoding give a tokenizer.json, which names its own regex");
  BpeVocabulary bpe;
  bpe.merges = merges_of_ranks(bytes_of_rank);
  bpe.token_bytes = std::move(bytes_of_rank);
  bpe.whole_piece_first = true;  // tiktoken looks a piece up whole before merging
  ByteLevelBpeParts parts;
  parts.encoder = std::make_unique<BytePairEncoder>(std::move(bpe));
  if (const int missing = parts.encoder->first_missing_byte(); missing >= 0) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", missing);
    throw Error("tokenizer " + path + ": no line gives the single byte " + hex +
                " a rank: byte-level BPE needs one for each of the 256 bytes (is the file cut short?)");
  }
  parts.path = path;
  parts.kind = "tiktoken";
  parts.origin = "tiktoken " + encoding->name;
  parts.pre_tokenizer.push_back({std::make_shared<PieceRegex>(encoding->pattern, path), false});
  for (const auto& [spelling, id] : encoding->special_tokens) parts.added_tokens.push_back({spelling, id});
  return make_byte_level_bpe(std::move(parts));
}

}  // namespace dtrain
