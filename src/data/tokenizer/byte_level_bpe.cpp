// ByteLevelBpe: the Tokenizer of byte_level_bpe.hpp.
#include "data/tokenizer/byte_level_bpe.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace dtrain {

namespace {

class ByteLevelBpe : public Tokenizer {
 public:
  explicit ByteLevelBpe(ByteLevelBpeParts parts)
      : parts_(std::move(parts)), added_(parts_.added_tokens), vocab_size_(int64_t(parts_.encoder->id_limit())) {
    for (const AddedToken& t : parts_.added_tokens) {
      added_by_id_[t.id] = &t;
      vocab_size_ = std::max(vocab_size_, int64_t(t.id) + 1);
    }
    for (const auto& [id, text] : parts_.decode_only) vocab_size_ = std::max(vocab_size_, int64_t(id) + 1);
    eos_ = added_id_of({"<|endoftext|>", "<|end_of_text|>"});
    bos_ = added_id_of({"<|begin_of_text|>"});
  }
  std::string kind() const override { return parts_.kind; }
  int64_t vocab_size() const override { return vocab_size_; }
  void encode(std::string_view text, std::vector<uint32_t>& out, SpecialText special) const override {
    std::vector<TextSection> sections;
    added_.split(text, special, sections);
    for (const TextSection& s : sections) {
      if (s.token >= 0)
        out.push_back(uint32_t(s.token));
      else
        pre_tokenize(0, s.text, out);
    }
  }
  std::string decode(std::span<const uint32_t> ids) const override {
    std::string text;
    for (const uint32_t id : ids) text += bytes_of(id);
    return text;
  }
  // Exact unless a space is put before pieces (add_prefix_space): decode gives that space back too.
  bool exact_decode() const override {
    return std::none_of(parts_.pre_tokenizer.begin(), parts_.pre_tokenizer.end(),
                        [](const PreTokenizerStep& s) { return s.prefix_space; });
  }
  int64_t eos_id() const override { return eos_; }
  int64_t bos_id() const override { return bos_; }
  std::string describe() const override {
    std::string s = "byte-level BPE (" + parts_.origin + ") of " + std::to_string(vocab_size_) + " tokens";
    for (const int64_t id : {bos_, eos_})
      if (id >= 0) s += ", " + added_by_id_.at(uint32_t(id))->content + " " + std::to_string(id);
    return s;
  }

 private:
  // Applies pre-tokenizer step `step` and those after it to `text`, then BPE to each piece.
  void pre_tokenize(size_t step, std::string_view text, std::vector<uint32_t>& out) const {
    if (text.empty()) return;
    if (step == parts_.pre_tokenizer.size()) return parts_.encoder->encode(text, out);
    const PreTokenizerStep& s = parts_.pre_tokenizer[step];
    if (s.split_by) {
      s.split_by->split(text, [&](std::string_view piece) { pre_tokenize(step + 1, piece, out); });
    } else if (s.prefix_space && text.front() != ' ') {
      const std::string spaced = " " + std::string(text);
      pre_tokenize(step + 1, spaced, out);
    } else {
      pre_tokenize(step + 1, text, out);
    }
  }
  const std::string& bytes_of(uint32_t id) const {
    if (const auto added = added_by_id_.find(id); added != added_by_id_.end()) return added->second->content;
    if (const std::string* bytes = parts_.encoder->bytes_of(id)) return *bytes;
    if (const auto other = parts_.decode_only.find(id); other != parts_.decode_only.end()) return other->second;
    throw Error("token id " + std::to_string(id) + " is not in the vocabulary of " + parts_.path + " (" +
                std::to_string(vocab_size_) + " ids" + (int64_t(id) < vocab_size_ ? ", this one unused)" : ")"));
  }
  int64_t added_id_of(std::initializer_list<std::string_view> spellings) const {
    for (const std::string_view spelling : spellings)
      for (const AddedToken& t : parts_.added_tokens)
        if (t.content == spelling) return t.id;
    return -1;
  }

  ByteLevelBpeParts parts_;
  AddedTokenMatcher added_;
  std::unordered_map<uint32_t, const AddedToken*> added_by_id_;  // points into parts_.added_tokens
  int64_t vocab_size_ = 0, eos_ = -1, bos_ = -1;
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_level_bpe(ByteLevelBpeParts parts) {
  return std::make_unique<ByteLevelBpe>(std::move(parts));
}

}  // namespace dtrain
