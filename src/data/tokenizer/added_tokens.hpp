// Added tokens (a tokenizer.json's added_tokens, a tiktoken encoding's special tokens): spellings
// that become one given id, found in the text before it is pre-tokenized, as Hugging Face finds
// them: the leftmost match, the longest at that position; tokens not `normalized` in a first pass
// over the text, the others in a second pass over what the first left.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/tokenizer.hpp"

namespace dtrain {

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = true;      // under SpecialText::text its spelling is plain text (a non-special one still matches)
  bool normalized = false;  // matched in the second pass (the text is not normalized: dtrain refuses normalizers)
  bool lstrip = false;      // takes the white space before it
  bool rstrip = false;      // takes the white space after it
  bool single_word = false; // matches only where no word character touches it on either side
};

// A stretch of text to pre-tokenize, or an added token's id.
struct TextSection {
  std::string_view text;  // when token < 0
  int64_t token = -1;
};

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  // Appends the sections of `text` in order. With no added token in it, one section: the text.
  void split(std::string_view text, SpecialText mode, std::vector<TextSection>& sections) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct TrieNode {
    std::vector<std::pair<unsigned char, uint32_t>> children;
    int32_t token = -1;  // index into tokens_ of the token spelled up to here
  };
  struct Trie {
    std::vector<TrieNode> nodes{1};
    std::array<bool, 256> starts{};  // bytes some token starts with
  };
  struct Match {
    size_t start = 0, end = 0;
    int32_t token = -1;
  };
  Match longest_at(const Trie& trie, std::string_view text, size_t at, SpecialText mode) const;
  void split_pass(const Trie& trie, std::string_view text, SpecialText mode, std::vector<TextSection>& out) const;
  bool stands_alone(std::string_view text, size_t start, size_t end) const;

  std::vector<AddedToken> tokens_;
  Trie exact_, normalized_;  // the tokens of the first and the second pass
};

}  // namespace dtrain
