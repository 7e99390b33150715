// What well-known byte-level BPE encodings add to their merge ranks: the pre-tokenizer regex and the
// special tokens of GPT-2 (r50k_base), cl100k_base, o200k_base and Llama 3, by their number of
// ranks (a tiktoken rank file names neither), and GPT-2's regex, which ByteLevel(use_regex) uses.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtrain {

// GPT-2's pre-tokenizer regex (tiktoken's gpt2 and r50k_base, Hugging Face's ByteLevel pre-tokenizer).
inline constexpr std::string_view kGpt2PiecePattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct BpeEncoding {
  std::string name;     // for describe(): "cl100k_base"
  size_t ranks;         // how many merge ranks its rank file has (0 .. ranks-1)
  std::string pattern;  // the pre-tokenizer regex
  std::vector<std::pair<std::string, uint32_t>> special_tokens;  // spelling and id
};

// The known encoding whose rank file has `ranks` ranks; nullptr when none has.
const BpeEncoding* bpe_encoding_of_size(size_t ranks);
// "50256 (gpt2), 100256 (cl100k_base), …" for messages.
std::string known_bpe_encoding_sizes();

}  // namespace dtrain
