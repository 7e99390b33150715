// AddedTokenMatcher (see added_tokens.hpp): a byte trie per pass, walked from each position whose
// byte starts some token; lstrip, rstrip and single_word as Hugging Face's added vocabulary reads
// them (Unicode white space; a word character is a letter, digit or underscore).
#include "data/tokenizer/added_tokens.hpp"

#include <algorithm>

#include "data/tokenizer/piece_regex.hpp"

namespace dtrain {

namespace {

const PieceRegex& added_token_word_char() {
  static const PieceRegex regex("\\w", "(added-token word check)");
  return regex;
}
const PieceRegex& added_token_white_space() {
  static const PieceRegex regex("\\s", "(added-token white space)");
  return regex;
}

// Where the UTF-8 character that ends at `end` starts (for bytes that are not UTF-8: end - 1).
size_t start_of_char_before(std::string_view text, size_t end) {
  size_t at = end - 1;
  while (at > 0 && end - at < 4 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  return at;
}

// Whether the character starting at `at` and ending at `end` is one match of `regex`.
bool char_matches(const PieceRegex& regex, std::string_view text, size_t at, size_t end) {
  return regex.match_length_at(text, at) == long(end - at);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& content = tokens_[t].content;
    if (content.empty()) continue;  // matches nothing (Hugging Face skips it too)
    Trie& trie = tokens_[t].normalized ? normalized_ : exact_;
    trie.starts[static_cast<unsigned char>(content[0])] = true;
    uint32_t node = 0;
    for (const char c : content) {
      auto& children = trie.nodes[node].children;
      const auto child = std::find_if(children.begin(), children.end(),
                                      [&](const auto& edge) { return edge.first == static_cast<unsigned char>(c); });
      if (child != children.end()) {
        node = child->second;
      } else {
        children.push_back({static_cast<unsigned char>(c), uint32_t(trie.nodes.size())});
        node = uint32_t(trie.nodes.size());
        trie.nodes.emplace_back();
      }
    }
    trie.nodes[node].token = int32_t(t);  // a later token of the same spelling wins, as in Hugging Face's map
  }
}

AddedTokenMatcher::Match AddedTokenMatcher::longest_at(const Trie& trie, std::string_view text, size_t at,
                                                       SpecialText mode) const {
  Match best;
  uint32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const auto& children = trie.nodes[node].children;
    const auto child = std::find_if(children.begin(), children.end(), [&](const auto& edge) {
      return edge.first == static_cast<unsigned char>(text[i]);
    });
    if (child == children.end()) break;
    node = child->second;
    const int32_t token = trie.nodes[node].token;
    if (token >= 0 && (mode == SpecialText::special || !tokens_[token].special)) best = {at, i + 1, token};
  }
  return best;
}

bool AddedTokenMatcher::stands_alone(std::string_view text, size_t start, size_t end) const {
  if (start > 0 && char_matches(added_token_word_char(), text, start_of_char_before(text, start), start)) return false;
  return end == text.size() || added_token_word_char().match_length_at(text, end) <= 0;
}

void AddedTokenMatcher::split_pass(const Trie& trie, std::string_view text, SpecialText mode,
                                   std::vector<TextSection>& out) const {
  size_t covered = 0;  // the end of the last section added
  for (size_t at = 0; at < text.size();) {
    if (!trie.starts[static_cast<unsigned char>(text[at])]) {
      ++at;
      continue;
    }
    Match m = longest_at(trie, text, at, mode);
    if (m.token < 0) {
      ++at;
      continue;
    }
    const AddedToken& token = tokens_[m.token];
    at = m.end;  // a match refused below is passed over as a whole, as Hugging Face's search does
    if (token.single_word && !stands_alone(text, m.start, m.end)) continue;
    if (token.lstrip)
      while (m.start > covered) {
        const size_t before = start_of_char_before(text, m.start);
        if (before < covered || !char_matches(added_token_white_space(), text, before, m.start)) break;
        m.start = before;
      }
    if (token.rstrip)
      for (long n; m.end < text.size() && (n = added_token_white_space().match_length_at(text, m.end)) > 0;) m.end += n;
    if (m.start > covered) out.push_back({text.substr(covered, m.start - covered), -1});
    out.push_back({{}, int64_t(token.id)});
    covered = at = m.end;
  }
  if (covered < text.size()) out.push_back({text.substr(covered), -1});
}

void AddedTokenMatcher::split(std::string_view text, SpecialText mode, std::vector<TextSection>& sections) const {
  if (tokens_.empty()) {
    if (!text.empty()) sections.push_back({text, -1});
    return;
  }
  std::vector<TextSection> first;
  split_pass(exact_, text, mode, first);
  for (const TextSection& s : first) {
    if (s.token >= 0)
      sections.push_back(s);
    else
      split_pass(normalized_, s.text, mode, sections);
  }
}

}  // namespace dtrain
