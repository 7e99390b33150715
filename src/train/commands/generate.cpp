// generate_text (see generate.hpp).
#include "train/commands/generate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "core/philox.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "models/registry.hpp"
#include "train/checkpoint/checkpoint.hpp"
#include "train/commands/checkpoint_model.hpp"

namespace dtrain {

namespace {

// The tokenizer the checkpoint keeps beside the model (the data's: tokenizer.model, tokenizer.json or
// the word-level vocab.txt), checked against the checkpoint's index before use.
std::unique_ptr<Tokenizer> kept_tokenizer(const std::string& checkpoint) {
  for (const char* name : {"tokenizer.model", "tokenizer.json", "vocab.txt"}) {
    if (!std::filesystem::exists(checkpoint + "/" + name)) continue;
    read_checkpoint_file(checkpoint, name);  // its size and checksum, as the index records them
    return Tokenizer::load(checkpoint + "/" + name);
  }
  throw Error("checkpoint " + checkpoint + " keeps no tokenizer (tokenizer.model, tokenizer.json or vocab.txt): use a "
              "checkpoint written by `dtrain train` on token data");
}

// The text the last id adds, decoded after the few ids before it (so a tokenizer that drops a leading
// space, or joins words by one, renders it as it would inside the text).
std::string added_text(const Tokenizer& tok, const std::vector<uint32_t>& ids) {
  const size_t n = ids.size(), from = n > 9 ? n - 9 : 0;
  const std::span<const uint32_t> all(ids.data() + from, n - from);
  const std::string before = tok.decode(all.first(all.size() - 1)), with = tok.decode(all);
  size_t common = 0;
  while (common < before.size() && common < with.size() && before[common] == with[common]) ++common;
  return with.substr(common);
}

}  // namespace

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
  const std::unique_ptr<Tokenizer> tok = kept_tokenizer(o.checkpoint);
  require(tok->vocab_size() == V, "checkpoint " + o.checkpoint + ": its tokenizer has " +
                                      std::to_string(tok->vocab_size()) + " tokens but the model " + std::to_string(V) +
                                      ": the checkpoint is inconsistent");
  std::vector<uint32_t> ids;
  tok->encode(o.prompt, ids);
  if (ids.empty()) {  // nothing to continue: start as a document starts
    const int64_t start = tok->bos_id() >= 0 ? tok->bos_id() : tok->eos_id();
    require(start >= 0, "--prompt is empty and the tokenizer has no BOS or EOS token to start from: give a prompt");
    ids.push_back(uint32_t(start));
  }
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
    const size_t before = out.size();
    out += added_text(*tok, ids);
    if (on_text) on_text(std::string_view(out).substr(before));
  }
  return out;
}

}  // namespace dtrain
