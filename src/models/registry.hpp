// The model kinds dtrain knows, found by model.kind: the one file that names every kind (a new
// kind adds its line in registry.cpp; see docs/extending.md).
#pragma once
#include <string>
#include <vector>

#include "core/json.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

// Every kind, the default (transformer) first.
const std::vector<const ModelKind*>& model_kinds();
// The kind named `name`; Error naming the known kinds otherwise.
const ModelKind& model_kind(const std::string& name);
// The kind of a model config.
inline const ModelKind& kind_of(const ModelConfig& c) { return model_kind(c.kind); }

// The model section as JSON (stored in checkpoints; resume checks it), every key of its kind
// filled in, and back: each value read by its kind's table. Errors name `source`, where j was read
// from (a section without "kind" is from before kinds existed: a transformer).
Json model_to_json(const ModelConfig& m);
ModelConfig model_from_json(const Json& j, const std::string& source = "checkpoint");

}  // namespace dtrain
