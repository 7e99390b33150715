// Text generation from a checkpoint: sampling (temperature, top-k) or greedy, over a sliding
// window of the model's context.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dtrain {

struct GenerateOptions {
  std::string checkpoint;
  std::string prompt;
  int64_t tokens = 50;
  float temperature = 1.0f;  // 0 = greedy
  int64_t top_k = 0;         // 0 = whole vocabulary
  uint64_t seed = 1;
};

// Most tokens one call makes: each token re-reads the whole context window, so longer texts are
// better made in several calls, each continuing the last output.
inline constexpr int64_t kMaxGenerateTokens = 100000;

// Returns the prompt followed by the generated text, decoded by the tokenizer the checkpoint keeps.
// `on_text`, when given, receives the same text as it is made: the prompt first, then each token's
// text (word-level: " word", or "\n" for <eos>).
std::string generate_text(const GenerateOptions& o, const std::function<void(std::string_view)>& on_text = {});

}  // namespace dtrain
