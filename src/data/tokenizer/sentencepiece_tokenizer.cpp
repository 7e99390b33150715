// SentencePiece through Debian's libsentencepiece: a user's tokenizer.model (BPE or unigram, Llama 1/2,
// Mistral, Gemma) and the trainer. Invalid UTF-8 reaches the library's normaliser, which reads each
// bad byte as U+FFFD (then <unk> or its bytes with byte fallback).
#include "data/tokenizer/sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <filesystem>
#include <thread>
#include <unordered_map>

#include <unistd.h>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "data/tokenizer/kinds.hpp"

// The library's log threshold (0 info, 1 warning, 2 error): exported by libsentencepiece but declared
// in a header Debian does not ship.
namespace sentencepiece::logging {
int GetMinLogLevel();
void SetMinLogLevel(int level);
}  // namespace sentencepiece::logging

namespace dtrain {

namespace {

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::string& path, const std::string& bytes) : path_(path) {
    const auto status = sp_.LoadFromSerializedProto(bytes);
    require(status.ok(), "tokenizer " + path + " is not a tokenizer file dtrain reads (" + status.ToString() +
                             "): give a SentencePiece or tiktoken tokenizer.model, a Hugging Face tokenizer.json "
                             "or a dtrain vocab.txt");
    for (int id = 0; id < sp_.GetPieceSize(); ++id)
      if (sp_.IsControl(id) && !sp_.IdToPiece(id).empty()) controls_.push_back({sp_.IdToPiece(id), uint32_t(id)});
  }
  std::string kind() const override { return "sentencepiece"; }
  int64_t vocab_size() const override { return sp_.GetPieceSize(); }
  void encode(std::string_view text, std::vector<uint32_t>& out, SpecialText special) const override {
    if (special == SpecialText::text) return encode_plain(text, out);
    // split at the spellings of control pieces (<s>, </s>), each piece of text between encoded alone
    size_t start = 0;
    while (start < text.size()) {
      size_t best = std::string_view::npos, best_len = 0;
      uint32_t best_id = 0;
      for (const auto& [spelling, id] : controls_) {
        const size_t at = text.find(spelling, start);
        if (at < best || (at == best && at != std::string_view::npos && spelling.size() > best_len))
          best = at, best_len = spelling.size(), best_id = id;
      }
      encode_plain(text.substr(start, best == std::string_view::npos ? std::string_view::npos : best - start), out);
      if (best == std::string_view::npos) break;
      out.push_back(best_id);
      start = best + best_len;
    }
  }
  std::string decode(std::span<const uint32_t> ids) const override {
    std::vector<int> v;
    v.reserve(ids.size());
    for (uint32_t id : ids) {
      require(int64_t(id) < vocab_size(), "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                              path_ + " (" + std::to_string(vocab_size()) + " pieces)");
      v.push_back(int(id));
    }
    std::string text;
    const auto status = sp_.Decode(v, &text);
    require(status.ok(), "tokenizer " + path_ + ": " + status.ToString());
    return text;
  }
  // Normalisation (NFKC by default, white space collapsed) makes it inexact in general.
  bool exact_decode() const override { return false; }
  int64_t eos_id() const override { return sp_.eos_id(); }
  int64_t bos_id() const override { return sp_.bos_id(); }
  std::string describe() const override {
    std::string s = "SentencePiece model of " + std::to_string(vocab_size()) + " pieces";
    for (const auto& [spelling, id] : controls_) s += ", " + spelling + " " + std::to_string(id);
    return s;
  }

 private:
  void encode_plain(std::string_view text, std::vector<uint32_t>& out) const {
    if (text.empty()) return;
    std::vector<int> ids;
    const auto status = sp_.Encode(absl::string_view(text.data(), text.size()), &ids);
    require(status.ok(), "tokenizer " + path_ + ": " + status.ToString());
    out.insert(out.end(), ids.begin(), ids.end());
  }

  std::string path_;
  sentencepiece::SentencePieceProcessor sp_;
  std::vector<std::pair<std::string, uint32_t>> controls_;  // spelling and id of each control piece
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path, const std::string& bytes) {
  return std::make_unique<SentencePieceTokenizer>(path, bytes);
}

void train_sentencepiece(const SentencePieceTrainOptions& o) {
  require(o.model_type == "bpe" || o.model_type == "unigram",
          "--model-type " + o.model_type + ": use bpe or unigram");
  require(!o.inputs.empty(), "tokenizer train needs --input FILE (text, one sentence or paragraph per line)");
  for (const std::string& in : o.inputs)
    require(std::filesystem::is_regular_file(in), "tokenizer train: input " + in + " is not a file");
  const std::string tmp_prefix = o.out + ".tmp" + std::to_string(::getpid());
  const int threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const std::unordered_map<std::string, std::string> args = {
      {"input", join(o.inputs)},
      {"model_prefix", tmp_prefix},
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"input_sentence_size", std::to_string(o.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
      {"unk_id", "0"}, {"bos_id", "1"}, {"eos_id", "2"}, {"pad_id", "-1"},
  };
  sentencepiece::SetRandomGeneratorSeed(unsigned(o.seed));
  const int log_level = sentencepiece::logging::GetMinLogLevel();
  sentencepiece::logging::SetMinLogLevel(2);  // errors only (no page of progress lines): status says why
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  sentencepiece::logging::SetMinLogLevel(log_level);
  if (!status.ok()) {
    std::error_code ec;
    std::filesystem::remove(tmp_prefix + ".model", ec);
    std::filesystem::remove(tmp_prefix + ".vocab", ec);
    throw Error("tokenizer train: SentencePiece refused (" + status.ToString() +
                "): mend what it names (most often --vocab-size against the text's characters and words)");
  }
  const std::string vocab_out = o.out.ends_with(".model") ? o.out.substr(0, o.out.size() - 6) + ".vocab"
                                                          : o.out + ".vocab";
  std::filesystem::rename(tmp_prefix + ".vocab", vocab_out);
  std::filesystem::rename(tmp_prefix + ".model", o.out);
}

}  // namespace dtrain
