// The course's word-level vocabulary (vocab.txt) behind the tokenizer interface: words split on ASCII
// white space, lower-cased when the vocabulary says so, unknown words to <unk>; decode joins words by
// spaces and <eos> as a line end (not the exact inverse: case, spacing and unknown words are lost).
#include <memory>

#include "core/error.hpp"
#include "data/tokenizer/kinds.hpp"
#include "data/vocab.hpp"

namespace dtrain {

namespace {

class WordTokenizer : public Tokenizer {
 public:
  explicit WordTokenizer(Vocabulary vocab) : vocab_(std::move(vocab)) {}
  std::string kind() const override { return "word"; }
  int64_t vocab_size() const override { return vocab_.size(); }
  // A word spelled `<eos>` is the <eos> word in either mode: the vocabulary has no other spelling.
  void encode(std::string_view text, std::vector<uint32_t>& out, SpecialText) const override {
    vocab_.encode_text(text, false, out);
  }
  // Words joined by spaces, <eos> as a line end.
  std::string decode(std::span<const uint32_t> ids) const override {
    std::string s;
    for (uint32_t id : ids) {
      const std::string& w = vocab_.word(id);
      if (vocab_.has_eos() && id == vocab_.eos_id()) s += '\n';
      else s += (s.empty() || s.back() == '\n' ? "" : " ") + w;
    }
    return s;
  }
  bool exact_decode() const override { return false; }
  int64_t eos_id() const override { return vocab_.has_eos() ? int64_t(vocab_.eos_id()) : -1; }
  int64_t bos_id() const override { return -1; }
  std::string describe() const override {
    return "word-level vocabulary of " + std::to_string(vocab_.size()) + " words (" +
           (vocab_.lowercase() ? "lower-cased" : "cased") + (vocab_.has_eos() ? ", <eos> between lines" : "") + ")";
  }

 private:
  Vocabulary vocab_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_word_tokenizer(const std::string& path) {
  return std::make_unique<WordTokenizer>(Vocabulary::load(path));
}

}  // namespace dtrain
