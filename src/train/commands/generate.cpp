// generate_text (see generate.hpp).
#include "train/commands/generate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "core/philox.hpp"
#include "data/vocab.hpp"
#include "models/registry.hpp"
#include "train/checkpoint/checkpoint.hpp"
#include "train/commands/checkpoint_model.hpp"

namespace dtrain {

std::string generate_text(const GenerateOptions& o, const std::function<void(std::string_view)>& on_text) {
  require(o.tokens >= 0 && o.tokens <= kMaxGenerateTokens,
          "--tokens " + std::to_string(o.tokens) + " is outside 0.." + std::to_string(kMaxGenerateTokens) +
              ": ask for at most " + std::to_string(kMaxGenerateTokens) +
              " tokens, and for more run generate again with the output as --prompt");
  require(o.temperature >= 0, "--temperature must not be negative: use 0 for greedy");
  const CheckpointModel cm(o.checkpoint);
  const ModelKind& kind = cm.kind;
  const SampleShape& sample = cm.sample;
  require(sample.input == InputKind::tokens && kind.metric() == Metric::perplexity,
          "checkpoint " + o.checkpoint + " is a model.kind = " + cm.config.kind +
              " model, not a language model: generate continues text; evaluate it with `dtrain eval`");
  const std::unique_ptr<Model> loaded = cm.load(1);
  Model& model = *loaded;
  const int64_t T = sample.inputs, V = model.outputs();  // the context; the vocabulary
  const std::string vocab_path = o.checkpoint + "/vocab.txt";
  require(std::filesystem::exists(vocab_path),
          "checkpoint " + o.checkpoint + " has no vocab.txt: use a checkpoint written by `dtrain train`");
  read_checkpoint_file(o.checkpoint, "vocab.txt");  // checked against the index before use
  const Vocabulary vocab = Vocabulary::load(vocab_path);
  require(int64_t(vocab.size()) == V, "checkpoint " + o.checkpoint + ": vocab.txt has " +
                                          std::to_string(vocab.size()) + " words but the model " + std::to_string(V) +
                                          ": the checkpoint is inconsistent");

  std::vector<uint32_t> ids = vocab.encode_line(o.prompt);
  if (!ids.empty() && vocab.has_eos() && ids.back() == vocab.eos_id()) ids.pop_back();  // continue the line
  if (ids.empty()) ids.push_back(vocab.has_eos() ? vocab.eos_id() : 0);
  std::string out = o.prompt;
  if (on_text) on_text(out);
  std::vector<float> logits(size_t(T * V));
  std::vector<int32_t> window;
  const RandomStream rng{o.seed, 0x9e11u, 0x5eedu, 0};
  std::vector<std::pair<float, uint32_t>> cand;  // (logit, word) of the last position
  for (int64_t n = 0; n < o.tokens; ++n) {
    const size_t start = ids.size() > size_t(T) ? ids.size() - size_t(T) : 0;
    window.assign(ids.begin() + int64_t(start), ids.end());
    StepContext ctx;
    ctx.B = 1;
    ctx.T = int64_t(window.size());
    model.predict({{InputKind::tokens, ctx.T, ctx.T}, 1, window.data(), nullptr}, ctx, logits.data());
    const float* last = logits.data() + (ctx.T - 1) * V;
    cand.clear();
    for (int64_t v = 0; v < V; ++v) cand.push_back({last[v], uint32_t(v)});
    // Only the k most likely words are ranked (ties by word id, so the order is fully defined).
    const size_t k = o.temperature <= 0 ? 1 : o.top_k > 0 ? std::min<size_t>(size_t(o.top_k), cand.size()) : cand.size();
    std::partial_sort(cand.begin(), cand.begin() + int64_t(k), cand.end(),
                      [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    uint32_t next = cand[0].second;
    if (o.temperature > 0) {
      std::vector<double> p(k);
      double sum = 0;
      for (size_t i = 0; i < k; ++i) sum += p[i] = std::exp(double(cand[i].first - cand[0].first) / o.temperature);
      double u = double(rng.uniform(uint64_t(n))) * sum;
      for (size_t i = 0; i < k; ++i) {
        next = cand[i].second;
        if ((u -= p[i]) <= 0) break;
      }
    }
    ids.push_back(next);
    const std::string& w = vocab.word(next);
    const size_t before = out.size();
    out += w == "<eos>" ? "\n" : (out.empty() || out.back() == '\n' ? "" : " ") + w;
    if (on_text) on_text(std::string_view(out).substr(before));
  }
  return out;
}

}  // namespace dtrain
