// GPT-2's byte-to-unicode alphabet, in which a tokenizer.json writes byte-level tokens: each of the
// 256 bytes is one printable code point (printable Latin-1 bytes stand for themselves, the others
// for U+0100 onwards), so a token's bytes are the code points of its text read back one by one.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace dtrain {

// The bytes a token written in the alphabet stands for; nullopt when `text` is not valid UTF-8 or
// holds a code point outside the alphabet.
std::optional<std::string> bytes_of_alphabet_text(std::string_view text);

// The text of `bytes` in the alphabet (UTF-8).
std::string alphabet_text_of_bytes(std::string_view bytes);

}  // namespace dtrain
