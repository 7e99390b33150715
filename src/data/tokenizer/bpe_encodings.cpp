// The table of bpe_encodings.hpp: regexes and special tokens as tiktoken (OpenAI's encodings) and
// Meta's llama3 tokenizer.py define them.
#include "data/tokenizer/bpe_encodings.hpp"

namespace dtrain {

namespace {

constexpr std::string_view kCl100kPiecePattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr std::string_view kO200kPiecePattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Llama 3's 256 special tokens from id 128000: ten named ones (reserved 0 to 4 among them), then
// <|reserved_special_token_5|> to <|reserved_special_token_250|> (Llama 3.1 renamed some reserved
// ones; the ids of begin and end of text are the same).
std::vector<std::pair<std::string, uint32_t>> llama3_special_tokens() {
  std::vector<std::string> names = {"<|begin_of_text|>",
                                    "<|end_of_text|>",
                                    "<|reserved_special_token_0|>",
                                    "<|reserved_special_token_1|>",
                                    "<|reserved_special_token_2|>",
                                    "<|reserved_special_token_3|>",
                                    "<|start_header_id|>",
                                    "<|end_header_id|>",
                                    "<|reserved_special_token_4|>",
                                    "<|eot_id|>"};
  for (int i = 5; names.size() < 256; ++i) names.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  std::vector<std::pair<std::string, uint32_t>> tokens;
  for (size_t i = 0; i < names.size(); ++i) tokens.push_back({names[i], uint32_t(128000 + i)});
  return tokens;
}

const std::vector<BpeEncoding>& known_encodings() {
  static const std::vector<BpeEncoding> encodings = {
      {"gpt2", 50256, std::string(kGpt2PiecePattern), {{"<|endoftext|>", 50256}}},
      {"cl100k_base",
       100256,
       std::string(kCl100kPiecePattern),
       {{"<|endoftext|>", 100257},
        {"<|fim_prefix|>", 100258},
        {"<|fim_middle|>", 100259},
        {"<|fim_suffix|>", 100260},
        {"<|endofprompt|>", 100276}}},
      {"Llama 3", 128000, std::string(kCl100kPiecePattern), llama3_special_tokens()},
      {"o200k_base", 199998, std::string(kO200kPiecePattern), {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}},
  };
  return encodings;
}

}  // namespace

const BpeEncoding* bpe_encoding_of_size(size_t ranks) {
  for (const BpeEncoding& e : known_encodings())
    if (e.ranks == ranks) return &e;
  return nullptr;
}

std::string known_bpe_encoding_sizes() {
  std::string s;
  for (const BpeEncoding& e : known_encodings())
    s += (s.empty() ? "" : ", ") + std::to_string(e.ranks) + " (" + e.name + ")";
  return s;
}

}  // namespace dtrain
