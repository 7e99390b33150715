// The DataSource of a folder prepared by `dtrain data prepare --tokenizer` (token shards per split and
// the tokenizer they index); DataSource::open chooses it when DIR/train/manifest.json is there.
#pragma once
#include <memory>
#include <string>

#include "data/source.hpp"

namespace dtrain {

std::unique_ptr<DataSource> open_shard_source(const std::string& dir);

// The tokenizer file of a prepared folder (tokenizer.model, tokenizer.json or vocab.txt), "" if none.
std::string find_tokenizer_file(const std::string& dir);

}  // namespace dtrain
