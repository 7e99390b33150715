// tiktoken rank files (`base64(token bytes) rank` per line: GPT-2, cl100k_base, o200k_base, Llama 3's
// tokenizer.model): the ranks, checked line by line, and the regex and special tokens of the known
// encoding their number names. A token's rank is its id, and a pair of tokens merges (at that rank)
// when their concatenation has one.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "core/error.hpp"
#include "data/tokenizer/bpe_encodings.hpp"
#include "data/tokenizer/byte_level_bpe.hpp"
#include "data/tokenizer/kinds.hpp"
#include "data/tokenizer/token_index.hpp"

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

// `text` split into lines, each with its number; empty lines skipped (as tiktoken skips them).
std::vector<std::pair<std::string_view, size_t>> rank_file_lines(const std::string& text) {
  std::vector<std::pair<std::string_view, size_t>> lines;
  size_t number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    if (line.ends_with('\r')) line.remove_suffix(1);
    ++number;
    if (!line.empty()) lines.push_back({line, number});
    start = end + 1;
  }
  return lines;
}

// The bytes of each rank. Ranks run from 0 to n-1 (n the file's lines), each once, each token once;
// `rank_of_token` gets each token's rank (views of the strings returned).
std::vector<std::string> read_ranks(const std::string& path, const std::string& text, TokenIndex& rank_of_token) {
  const auto lines = rank_file_lines(text);
  std::vector<std::string> bytes_of_rank(lines.size());
  std::vector<size_t> line_of_rank(lines.size(), 0);
  for (const auto& [line, number] : lines) {
    auto [bytes, rank] = parse_rank_line(line, number, path);
    if (rank >= lines.size())
      refuse_line(path, number, "rank " + std::to_string(rank) + " is not below the file's " +
                                    std::to_string(lines.size()) + " ranks (they run from 0 to n-1)");
    if (line_of_rank[rank] != 0)
      refuse_line(path, number, "rank " + std::to_string(rank) + " is given twice (line " +
                                    std::to_string(line_of_rank[rank]) + " has it too)");
    if (bytes.empty()) refuse_line(path, number, "an empty token");
    line_of_rank[rank] = number;
    bytes_of_rank[rank] = std::move(bytes);
  }
  rank_of_token.reserve(bytes_of_rank.size());
  for (size_t r = 0; r < bytes_of_rank.size(); ++r)
    if (const uint32_t first = rank_of_token.insert(bytes_of_rank[r], uint32_t(r)); first != r)
      refuse_line(path, std::max(line_of_rank[r], line_of_rank[first]),
                  "the same token as line " + std::to_string(std::min(line_of_rank[r], line_of_rank[first])));
  return bytes_of_rank;
}

// Every pair of tokens whose concatenation is a token merges into it, at its rank.
PairMergeTable merges_of_ranks(const std::vector<std::string>& bytes_of_rank, const TokenIndex& rank_of) {
  PairMergeTable merges;
  merges.reserve(2 * bytes_of_rank.size());
  std::vector<uint64_t> hashes;  // of each cut's left part, then of its right part
  for (size_t r = 0; r < bytes_of_rank.size(); ++r) {
    const std::string_view token = bytes_of_rank[r];
    // all the token's lookups hashed and their slots prefetched first: the table is far larger than
    // the cache, and independent misses overlap
    hashes.assign(2 * token.size(), 0);
    for (size_t cut = 1; cut < token.size(); ++cut) {
      rank_of.prefetch(hashes[2 * cut] = TokenIndex::hash_of(token.substr(0, cut)));
      rank_of.prefetch(hashes[2 * cut + 1] = TokenIndex::hash_of(token.substr(cut)));
    }
    for (size_t cut = 1; cut < token.size(); ++cut) {
      const int64_t left = rank_of.find(token.substr(0, cut), hashes[2 * cut]);
      if (left == TokenIndex::kAbsent) continue;
      const int64_t right = rank_of.find(token.substr(cut), hashes[2 * cut + 1]);
      if (right != TokenIndex::kAbsent) merges.set(uint32_t(left), uint32_t(right), {uint32_t(r), uint32_t(r)});
    }
  }
  return merges;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tiktoken(const std::string& path, const std::string& text) {
  TokenIndex rank_of_token;
  std::vector<std::string> bytes_of_rank = read_ranks(path, text, rank_of_token);
  const BpeEncoding* encoding = bpe_encoding_of_size(bytes_of_rank.size());
  if (!encoding)
    throw Error("tokenizer " + path + ": a tiktoken rank file of " + std::to_string(bytes_of_rank.size()) +
                " ranks is not an encoding dtrain knows (it knows those of " + known_bpe_encoding_sizes() +
                " ranks): a rank file does not say its pre-tokenizer regex or special tokens, which dtrain takes "
                "from its size; for another encoding give a tokenizer.json, which names its own regex");
  BpeVocabulary bpe;
  bpe.merges = merges_of_ranks(bytes_of_rank, rank_of_token);
  bpe.token_bytes = std::move(bytes_of_rank);
  bpe.whole_piece_first = true;  // tiktoken looks a piece up whole before merging
  ByteLevelBpeParts parts;
  parts.encoder = std::make_unique<BytePairEncoder>(std::move(bpe));
  if (const int missing = parts.encoder->first_missing_byte(); missing >= 0) {
    char hex[16];
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
