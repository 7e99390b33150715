// GPT-2's byte-to-unicode alphabet (see byte_alphabet.hpp): the table and both directions.
#include "data/tokenizer/byte_alphabet.hpp"

#include <array>
#include <cstdint>

namespace dtrain {

namespace {

// Byte b's code point: itself when printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ'), else 256, 257,
// … in byte order for the 68 others (space is U+0120 'Ġ', newline U+010A 'Ċ').
std::array<uint16_t, 256> alphabet_code_points() {
  std::array<uint16_t, 256> cp{};
  uint16_t next_unprintable = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    cp[b] = printable ? uint16_t(b) : next_unprintable++;
  }
  return cp;
}

const std::array<uint16_t, 256>& code_point_of_byte() {
  static const std::array<uint16_t, 256> table = alphabet_code_points();
  return table;
}

// The byte each alphabet code point (all below 324) stands for, -1 for code points outside it.
const std::array<int16_t, 324>& byte_of_code_point() {
  static const std::array<int16_t, 324> table = [] {
    std::array<int16_t, 324> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[code_point_of_byte()[b]] = int16_t(b);
    return t;
  }();
  return table;
}

}  // namespace

std::optional<std::string> bytes_of_alphabet_text(std::string_view text) {
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    uint32_t cp;
    if (lead < 0x80) {
      cp = lead, i += 1;
    } else if ((lead & 0xE0) == 0xC0 && i + 1 < text.size() && (text[i + 1] & 0xC0) == 0x80) {
      cp = uint32_t(lead & 0x1F) << 6 | (text[i + 1] & 0x3F), i += 2;
      if (cp < 0x80) return std::nullopt;  // an overlong spelling is not UTF-8
    } else {
      return std::nullopt;  // three- and four-byte code points are all above U+07FF: outside the alphabet
    }
    if (cp >= byte_of_code_point().size() || byte_of_code_point()[cp] < 0) return std::nullopt;
    bytes += char(byte_of_code_point()[cp]);
  }
  return bytes;
}

std::string alphabet_text_of_bytes(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const uint16_t cp = code_point_of_byte()[static_cast<unsigned char>(c)];
    if (cp < 0x80) {
      text += char(cp);
    } else {
      text += char(0xC0 | (cp >> 6));
      text += char(0x80 | (cp & 0x3F));
    }
  }
  return text;
}

}  // namespace dtrain
