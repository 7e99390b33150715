// Training a SentencePiece model (BPE or unigram) with the library's own trainer, written atomically.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

struct SentencePieceTrainOptions {
  std::vector<std::string> inputs;  // text files, one sentence (or paragraph) per line
  std::string out;                  // the model file to write (FILE.model); FILE.vocab is written beside it
  std::string model_type = "bpe";   // bpe or unigram
  int64_t vocab_size = 8000;
  bool byte_fallback = true;            // bytes of unseen characters as <0xNN> pieces (Llama's choice): no <unk>
  double character_coverage = 0.9995;   // characters covered by the model (the rest: bytes or <unk>)
  int64_t max_sentences = 2000000;      // sentences sampled from the inputs (0: all)
  int threads = 0;                      // 0: the machine's cores
  uint64_t seed = 1;                    // the sampling of sentences
};

// Trains and writes opts.out (and .vocab beside it) through temporary files and renames; ids: <unk> 0,
// <s> 1, </s> 2 (Llama's). Error with the library's message and the fix when training fails (a
// vocabulary larger than the text allows, an empty input).
void train_sentencepiece(const SentencePieceTrainOptions& opts);

}  // namespace dtrain
