// `dtrain data prepare --tokenizer …` (token shards) and `dtrain data verify DIR`: the options read
// from the command line, the summaries printed.
#pragma once
#include "train/commands/command_args.hpp"

namespace dtrain {

// The options only the shard preparation takes (refused by the word-level prepare).
inline constexpr const char* kShardOnlyOptions[] = {"tokenizer", "split",  "text-key", "dataset", "workers",
                                                    "memory-mib", "shard-tokens", "special-tokens", "docs-by"};

int prepare_shards_command(const CommandArgs& a);
// DIR: a prepared folder (each split in it) or one split folder.
int verify_shards_command(const CommandArgs& a);

}  // namespace dtrain
