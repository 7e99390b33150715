// Text generation from a checkpoint: sampling (temperature, top-k) or greedy, over a sliding
// window of the model's context.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

struct GenerateOptions {
  std::string checkpoint;
  std::string prompt;
  int64_t tokens = 50;
  float temperature = 1.0f;  // 0 = greedy
  int64_t top_k = 0;         // 0 = whole vocabulary
  uint64_t seed = 1;
};

// Returns the prompt followed by the generated words.
std::string generate_text(const GenerateOptions& o);

}  // namespace dtrain
