// The pre-tokenizer's regex: PCRE2 (UTF, Unicode properties, JIT-compiled where the library can)
// splitting text into pieces that BPE then encodes one by one. Text need not be valid UTF-8: bytes
// that are not never match (PCRE2_MATCH_INVALID_UTF), and every byte no match covers still becomes
// part of a piece (the run of bytes between two matches is one piece), so no byte is ever dropped.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace dtrain {

class PieceRegex {
 public:
  // Compiles `pattern`, written as tokenizer files write it (Rust's or Oniguruma's syntax, which
  // PCRE2 shares for what these patterns use); `\s` and `\S` are taken in Rust's sense (Unicode
  // White_Space, which includes U+0085 where PCRE2's own does not). Error naming `source`.
  PieceRegex(const std::string& pattern, const std::string& source);
  ~PieceRegex();
  PieceRegex(const PieceRegex&) = delete;
  PieceRegex& operator=(const PieceRegex&) = delete;

  // Calls `piece` with each non-empty match in `text` and each run of bytes between matches (and
  // before the first, after the last), in order: together exactly `text`. Thread-safe.
  void split(std::string_view text, const std::function<void(std::string_view)>& piece) const;
  // The length of the match that starts at `offset` of `text` (anchored there), -1 when none.
  long match_length_at(std::string_view text, size_t offset) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_, source_;
  void* code_ = nullptr;  // pcre2_code_8
};

// `pattern` with `\s` and `\S` spelled as explicit classes of Unicode White_Space (Rust's meaning).
std::string with_rust_white_space(const std::string& pattern);

}  // namespace dtrain
