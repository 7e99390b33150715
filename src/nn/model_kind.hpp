// A model kind (DESIGN §3.11): what the rest of dtrain may know of a model. It names and checks its
// config keys (model.<name>), builds its units, and declares its input, loss metric and costs. The
// kinds live in src/models/<kind>/ and are found by `model.kind` through src/models/registry; nothing
// else names a concrete model.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "data/source.hpp"
#include "nn/expert_exchange.hpp"
#include "nn/model.hpp"
#include "nn/sequence_attention.hpp"
#include "nn/tp_regions.hpp"

namespace dtrain {

// The model section of a run's config: its kind and the values given for that kind's keys (from a
// config file, --set or a checkpoint), each already checked by the kind.
struct ModelConfig {
  std::string kind = "transformer";
  Json values = Json::object();  // name (without "model.") → value
  bool operator==(const ModelConfig& o) const { return kind == o.kind && values == o.values; }
};

// What evaluation reports besides the loss.
enum class Metric { perplexity, accuracy };

class ModelKind {
 public:
  virtual ~ModelKind() = default;
  virtual std::string name() const = 0;   // its model.kind
  virtual std::string about() const = 0;  // one line: what it is
  // Its keys (model.<name>): each one's default, type, range and meaning, for `dtrain config keys`.
  virtual std::string describe_keys() const = 0;
  virtual std::vector<std::string> keys() const = 0;  // names without "model."
  // One value given as text, checked and in the JSON form the config keeps (Error naming the key,
  // where it came from and the fix).
  virtual Json parse(const std::string& name, const std::string& text, const std::string& origin) const = 0;
  // Every key's value, defaults filled in, and "kind" (config.json, checkpoints).
  virtual Json complete(const ModelConfig& c) const = 0;
  // Values that do not fit together; data_known: the values the data gives (fit_to_data) are set.
  virtual void validate(const ModelConfig& c, bool data_known) const = 0;
  // The data's facts into the config; Error when a value given contradicts them.
  virtual void fit_to_data(ModelConfig& c, const DataFacts& data, const std::string& data_name) const = 0;

  virtual SampleShape sample_shape(const ModelConfig& c) const = 0;
  virtual Metric metric() const = 0;
  virtual float dropout(const ModelConfig& c) const = 0;
  virtual std::string describe(const ModelConfig& c) const = 0;  // a few words for the run's banner
  // Every unit of the model, declared (parameters with global names, shapes and tensor-parallel
  // cuts), nothing planned yet: slice `slice`, meeting the other slices through `regions`; context
  // parallel: its attention through `sequence` (null: whole sequences; a kind without attention
  // refuses it); expert parallel: its experts split over ranks, reached through `experts` (null: all
  // here; a kind without experts refuses it). Error for a slicing the model cannot take (what must
  // divide, named).
  virtual UnitList units(const ModelConfig& c, ComputeDevice& device, TpSlice slice = {},
                         TpRegions& regions = no_tp_regions(), SequenceAttention* sequence = nullptr,
                         ExpertExchange* experts = nullptr) const = 0;
  // The values a plain weights file decides (ckpt import; a language model's vocabulary: its
  // embedding's rows), from its tensors' names and shapes; Error naming what does not fit this kind.
  virtual void fit_to_weights(ModelConfig& c, const std::map<std::string, std::vector<int64_t>>& shapes,
                              const std::string& file) const = 0;
};

// A kind without experts, given expert parallel's exchange: ConfigError naming the fix.
inline void refuse_expert_parallel(const std::string& kind, const ExpertExchange* experts) {
  if (experts && experts->ranks() > 1)
    throw ConfigError("parallel.ep = " + std::to_string(experts->ranks()) + ": model.kind = " + kind +
                      " has no experts to split: use model.kind = moe, or parallel.ep = 1");
}

}  // namespace dtrain
