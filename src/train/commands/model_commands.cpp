// The commands that use a trained checkpoint: `dtrain eval`, `dtrain predict`, `dtrain generate`.
#include <cstdio>

#include "train/commands/classify.hpp"
#include "train/commands/commands.hpp"
#include "train/commands/evaluate_checkpoint.hpp"
#include "train/commands/generate.hpp"
#include "train/threads.hpp"

namespace dtrain {

int eval_command(int argc, char** argv) {
  CommandArgs a =
      parse_command_args(argc, argv, 2, {}, {"checkpoint", "data", "split", "batch-size", "threads", "precision"});
  configure_threads(a.integer("threads", 0, 0, kMaxCount), "--threads");
  EvalOptions o;
  o.checkpoint = a.need("checkpoint");
  o.data = a.get("data");
  o.split = a.get("split", "test");
  o.batch_size = a.integer("batch-size", 64, 1, kMaxCount);
  o.precision = a.precision();
  evaluate_checkpoint(o, stdout);
  return 0;
}

int predict_command(int argc, char** argv) {
  CommandArgs a = parse_command_args(argc, argv, 2, {},
                                     {"checkpoint", "input", "format", "top", "batch-size", "threads", "precision"});
  configure_threads(a.integer("threads", 0, 0, kMaxCount), "--threads");
  PredictOptions o;
  o.checkpoint = a.need("checkpoint");
  o.input = a.need("input");
  o.format = a.get("format", "auto");
  o.top = a.integer("top", 1, 1, 1 << 20);
  o.batch_size = a.integer("batch-size", 64, 1, kMaxCount);
  o.precision = a.precision();
  predict_images(o, stdout);
  return 0;
}

int generate_command(int argc, char** argv) {
  CommandArgs a = parse_command_args(argc, argv, 2, {},
                                     {"checkpoint", "prompt", "tokens", "temperature", "top-k", "seed", "threads"});
  configure_threads(a.integer("threads", 0, 0, kMaxCount), "--threads");
  GenerateOptions o;
  o.checkpoint = a.need("checkpoint");
  o.prompt = a.get("prompt");
  o.tokens = a.integer("tokens", 50, 0, kMaxGenerateTokens);
  o.temperature = float(a.number("temperature", 1.0));
  o.top_k = a.integer("top-k", 0, 0, kMaxCount);
  o.seed = uint64_t(a.integer("seed", 1, 0, INT64_MAX));
  generate_text(o, [](std::string_view t) {  // each token as it comes
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
  });
  std::printf("\n");
  return 0;
}

}  // namespace dtrain
