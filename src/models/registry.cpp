// The list of model kinds (see registry.hpp).
#include "models/registry.hpp"

#include "core/error.hpp"
#include "models/cnn/kind.hpp"
#include "models/llama/kind.hpp"
#include "models/transformer/kind.hpp"

namespace dtrain {

const std::vector<const ModelKind*>& model_kinds() {
  static const std::vector<const ModelKind*> kinds = {&transformer_kind(), &llama_kind(), &cnn_kind()};
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

}  // namespace dtrain
