// The list of model kinds (see registry.hpp).
#include "models/registry.hpp"

#include <algorithm>

#include "core/config_keys.hpp"
#include "core/error.hpp"
#include "models/cnn/kind.hpp"
#include "models/llama/kind.hpp"
#include "models/moe/kind.hpp"
#include "models/transformer/kind.hpp"

namespace dtrain {

const std::vector<const ModelKind*>& model_kinds() {
  static const std::vector<const ModelKind*> kinds = {&transformer_kind(), &llama_kind(), &moe_kind(), &cnn_kind()};
  return kinds;
}

const ModelKind& model_kind(const std::string& name) {
  std::string known;
  for (const ModelKind* k : model_kinds()) {
    if (k->name() == name) return *k;
    known += (known.empty() ? "" : ", ") + k->name();
  }
  throw Error("model.kind = \"" + name + "\" is not a model dtrain knows: use one of " + known +
              " (docs/extending.md says how to add one)");
}

Json model_to_json(const ModelConfig& m) { return kind_of(m).complete(m); }

ModelConfig model_from_json(const Json& j, const std::string& source) {
  require(j.is_object(), source + " is a JSON " + j.type_name() +
                             ", expected an object such as {\"dim\": 128}; use a dtrain checkpoint");
  ModelConfig m;
  if (j.contains("kind")) {
    std::string known;
    for (const ModelKind* k : model_kinds()) known += (known.empty() ? "" : "|") + k->name();
    m.kind = parse_config_choice("model.kind", json_config_text(j["kind"]), source, known);
  }
  const ModelKind& kind = kind_of(m);
  const std::vector<std::string> keys = kind.keys();
  for (const auto& [name, v] : j.items()) {
    if (name == "kind") continue;
    require(std::find(keys.begin(), keys.end(), name) != keys.end(),
            "model." + name + " (" + source + ") is not a key of model.kind = " + kind.name() +
                " (`dtrain config keys` lists each kind's keys): remove it or fix its name");
    m.values[name] = kind.parse(name, json_config_text(v), source);
  }
  return m;
}

}  // namespace dtrain
