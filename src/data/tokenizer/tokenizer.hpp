// The tokenizer interface: text to token ids and back, whatever the kind (the word-level vocabulary
// of the course's model, SentencePiece, byte-level BPE from a tokenizer.json or a tiktoken rank file).
// Tokenizer::load chooses the kind by what the file holds, so a data folder records only its file.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// What text that spells a special token (`<|endoftext|>`, `</s>`) becomes. `text` (the default):
// plain text, encoded like any other characters, so a corpus cannot inject a control token;
// `special`: the special token's id (tiktoken's allowed_special="all", Hugging Face's added tokens).
enum class SpecialText { text, special };
SpecialText parse_special_text(const std::string& value);  // "text" or "special"; Error otherwise

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Opens a tokenizer file by its content: a dtrain vocab.txt (word), a Hugging Face tokenizer.json
  // (byte-level BPE), a tiktoken rank file (byte-level BPE), or a SentencePiece model. Error naming
  // the file and the kinds it may be when it is none of them, or damaged.
  static std::unique_ptr<Tokenizer> load(const std::string& path);

  // "word", "sentencepiece", "bpe" (tokenizer.json) or "tiktoken".
  virtual std::string kind() const = 0;
  // Every id encode gives is below this.
  virtual int64_t vocab_size() const = 0;
  // Appends the ids of `text` to `out`: no BOS or EOS is added. Thread-safe (workers share one).
  virtual void encode(std::string_view text, std::vector<uint32_t>& out,
                      SpecialText special = SpecialText::text) const = 0;
  // The text of `ids`. Error on an id >= vocab_size().
  virtual std::string decode(std::span<const uint32_t> ids) const = 0;
  // Whether decode(encode(t)) gives t back byte for byte for every valid UTF-8 text t.
  virtual bool exact_decode() const = 0;
  // The id placed between documents (EOS, `<|endoftext|>`), -1 when the tokenizer has none.
  virtual int64_t eos_id() const = 0;
  // The id that starts a sequence (BOS), -1 when none.
  virtual int64_t bos_id() const = 0;
  // One line for messages: kind, vocabulary size, the special tokens it knows.
  virtual std::string describe() const = 0;
};

}  // namespace dtrain
