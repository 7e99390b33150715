// The byte-level BPE tokenizer that both file kinds build (tokenizer.json, tiktoken rank files):
// added tokens first, then the pre-tokenizer's steps, then BPE on each piece's bytes; decode
// concatenates the tokens' bytes, so it is the exact inverse of encode.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizer/added_tokens.hpp"
#include "data/tokenizer/byte_pair_encoder.hpp"
#include "data/tokenizer/piece_regex.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace dtrain {

// One step of the pre-tokenizer, applied to each piece the step before made (the first: to each
// stretch of text between added tokens).
struct PreTokenizerStep {
  // Split by this regex, keeping the matches and the text between them as pieces (Hugging Face's
  // Split with behavior Isolated; ByteLevel with use_regex; tiktoken's pattern).
  std::shared_ptr<const PieceRegex> split_by;
  // Or, without split_by: put a space before each piece that does not start with one (ByteLevel's
  // add_prefix_space).
  bool prefix_space = false;
};

struct ByteLevelBpeParts {
  std::string path;    // the file, for messages
  std::string kind;    // "bpe" (tokenizer.json) or "tiktoken"
  std::string origin;  // what describe() names it by: "tokenizer.json", "tiktoken cl100k_base"
  std::unique_ptr<BytePairEncoder> encoder;
  std::vector<PreTokenizerStep> pre_tokenizer;
  std::vector<AddedToken> added_tokens;
  // Vocabulary entries that are not byte-level tokens (text outside GPT-2's byte alphabet): no
  // merge reaches them, decode gives their text.
  std::unordered_map<uint32_t, std::string> decode_only;
};

// The tokenizer of `parts`. Its EOS is the added token <|endoftext|> or <|end_of_text|>, its BOS
// <|begin_of_text|>, where present.
std::unique_ptr<Tokenizer> make_byte_level_bpe(ByteLevelBpeParts parts);

}  // namespace dtrain
