// evaluate_checkpoint (see evaluate_checkpoint.hpp).
#include "train/commands/evaluate_checkpoint.hpp"

#include <cmath>
#include <filesystem>

#include "data/mix_source.hpp"
#include "data/source.hpp"
#include "train/checkpoint/checkpoint.hpp"
#include "train/commands/checkpoint_model.hpp"
#include "train/commands/classify.hpp"
#include "train/evaluate.hpp"

namespace dtrain {

namespace {
// The data the checkpoint's run trained on (its trainer.json: data.dir, or data.mix), when --data is
// not given; `described` receives its name for messages.
std::unique_ptr<DataSource> trained_data(const std::string& ck, InputKind input, std::string& described) {
  const std::string path = ck + "/trainer.json";
  require(std::filesystem::exists(path), "checkpoint " + ck +
                                             " does not say which data it was trained on: "
                                             "give --data DIR");
  const Json trainer = parse_json(read_checkpoint_file(ck, "trainer.json"), path);
  const Json& data = json_at(trainer, "config.data", path);
  if (data.contains("mix") && data["mix"].is_array() && !data["mix"].empty()) {
    described = "the mix of " + std::to_string(data["mix"].size()) + " sources it trained on";
    return open_mix_source(parse_mix(data["mix"].dump()), input);
  }
  described = json_get<std::string>(trainer, "config.data.dir", path);
  return DataSource::open(described, input);
}
}  // namespace

void evaluate_checkpoint(const EvalOptions& o, std::FILE* out) {
  const std::string& ck = o.checkpoint;
  const CheckpointModel cm(ck);
  const std::string& split = o.split;
  require(split == "valid" || split == "test" || split == "train", "--split " + split + ": use valid, test or train");
  std::string data = o.data;
  const std::unique_ptr<DataSource> source =
      o.data.empty() ? trained_data(ck, cm.sample.input, data) : DataSource::open(o.data, cm.sample.input);
  require_same_data(ck, *source, "evaluate");
  ModelConfig fitted = cm.config;  // the data must be what the model was trained on
  try {
    cm.kind.fit_to_data(fitted, source->facts(), data);
  } catch (const Error& e) {
    throw Error("checkpoint " + ck + " does not fit the data of " + data + " (" + e.what() +
                "): evaluate on the data the model was trained on");
  }
  const int64_t B = o.batch_size;
  const std::unique_ptr<Model> model = cm.load(B);
  const std::unique_ptr<Dataset> ds = source->split(split, cm.sample, {});
  const EvalResult r = evaluate(*model, *ds, B, 0, o.precision);
  require(std::isfinite(r.loss), "the " + split + " loss of " + ck +
                                     " is not finite: its weights hold NaN or "
                                     "infinity (a diverged run); evaluate an earlier checkpoint");
  const Metric metric = cm.kind.metric();
  std::fprintf(out, "%s loss: %.5f, %s: %s (%lld %s)\n", split.c_str(), r.loss, metric_name(metric).c_str(),
               metric_text(metric, r).c_str(), (long long)r.rows, source->row_unit().c_str());
  if (metric == Metric::accuracy) {  // a classifier: which classes it confuses
    const Confusion c = confusion_matrix(*model, *ds, B, o.precision);
    require(
        c.right() == int64_t(std::llround(r.metric)),
        "internal: the confusion matrix's diagonal (" + std::to_string(c.right()) + ") is not the accuracy's count");
    std::fprintf(out, "%s", confusion_text(c, source->class_names()).c_str());
  }
}

}  // namespace dtrain
