// The tokenizer kinds Tokenizer::load chooses between, each opened from its file's path and bytes.
#pragma once
#include <memory>
#include <string>

#include "data/tokenizer/tokenizer.hpp"

namespace dtrain {

// A dtrain vocab.txt (`dtrain-vocab 1 …`): the course's word-level vocabulary.
std::unique_ptr<Tokenizer> load_word_tokenizer(const std::string& path);
// A SentencePiece model (a serialized ModelProto: BPE or unigram), through libsentencepiece.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path, const std::string& bytes);
// A Hugging Face tokenizer.json whose model is byte-level BPE (GPT-2, Llama 3, Qwen style).
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path, const std::string& bytes);
// A tiktoken rank file (`base64(token bytes) rank` per line: GPT-2/r50k, cl100k, o200k, Llama 3's
// tokenizer.model); the pre-tokenizer regex and special tokens are those of the encoding its size names.
std::unique_ptr<Tokenizer> load_tiktoken(const std::string& path, const std::string& bytes);

}  // namespace dtrain
