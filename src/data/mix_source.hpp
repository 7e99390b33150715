// data.mix: several prepared token folders drawn from in given proportions, as one DataSource.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/source.hpp"

namespace dtrain {

struct MixEntry {
  std::string dir;
  double weight = 0;
};

// Opens every folder (token data, one tokenizer for all); the training split mixes them by weight
// (MixDataset, an epoch as many samples as the sources' train splits hold together), validation and
// test concatenate them whole and split_parts() gives each source's alone. Error naming the folder
// whose tokenizer differs from the first one's, a weight that is negative or not finite, or weights
// that sum to zero.
std::unique_ptr<DataSource> open_mix_source(const std::vector<MixEntry>& entries, InputKind input);

// The entries of a data.mix value as JSON text (`[{"dir": "…", "weight": 0.7}, …]`, as TOML's array of
// tables reads): Error naming the problem and the fix for anything else.
std::vector<MixEntry> parse_mix(const std::string& json_text);

}  // namespace dtrain
