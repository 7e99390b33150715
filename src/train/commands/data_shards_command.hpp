// `dtrain data prepare --tokenizer …` (token shards) and `dtrain data verify DIR`: the options read
// from the command line, the summaries printed.
#pragma once
#include "train/commands/command_args.hpp"

namespace dtrain {

// Error when the options of a `dtrain data` command other than prepare --tokenizer hold one that only
// the shard preparation takes, or several --input.
void refuse_shard_options(const CommandArgs& a);

int prepare_shards_command(const CommandArgs& a);
// DIR: a prepared folder (each split in it) or one split folder.
int verify_shards_command(const CommandArgs& a);

}  // namespace dtrain
