// Byte-pair encoding of one pre-token, shared by the tokenizer.json and tiktoken kinds: the piece's
// bytes start as one token each, and the adjacent pair of lowest merge rank (the leftmost of equal
// ones) merges into one token until no adjacent pair merges.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/pair_merge_table.hpp"
#include "data/tokenizer/token_index.hpp"

namespace dtrain {

struct BpeVocabulary {
  std::vector<std::string> token_bytes;  // the bytes of each id; "" where no token has that id
  PairMergeTable merges;                 // which adjacent pairs merge, at what rank, into what
  // A piece that is itself a token becomes that token without merging (tiktoken always; Hugging
  // Face's ignore_merges): the two can differ for tokens that merging would not reach.
  bool whole_piece_first = false;
};

class BytePairEncoder {
 public:
  explicit BytePairEncoder(BpeVocabulary vocabulary);
  // The first of the 256 bytes no token spells alone, -1 when each is a token. encode needs all.
  int first_missing_byte() const;
  // Appends the tokens of `piece`. Linear-logarithmic in its length (a megabyte of spaces is fine).
  void encode(std::string_view piece, std::vector<uint32_t>& out) const;
  // The bytes of token `id`; nullptr when no token has that id.
  const std::string* bytes_of(uint32_t id) const {
    return id < token_bytes_.size() && !token_bytes_[id].empty() ? &token_bytes_[id] : nullptr;
  }
  // One more than the largest id.
  size_t id_limit() const { return token_bytes_.size(); }

 private:
  static constexpr uint32_t kNoMerge = ~uint32_t(0);
  void merge_short_piece(std::string_view piece, std::vector<uint32_t>& out) const;
  void merge_long_piece(std::string_view piece, std::vector<uint32_t>& out) const;

  std::vector<std::string> token_bytes_;
  PairMergeTable merges_;
  std::array<uint32_t, 256> byte_ids_;                            // kNoMerge where missing
  TokenIndex whole_pieces_;  // views of token_bytes_; empty unless whole_piece_first
};

}  // namespace dtrain
