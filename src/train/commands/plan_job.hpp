// `dtrain plan --config C --world N …`: the layouts of a whole job, ranked by predicted step time,
// each with its memory; `--mesh` explains one; `--calibrate` measures this machine's profile.
#pragma once
#include "train/commands/command_args.hpp"

namespace dtrain {

int plan_job_command(const CommandArgs& a);

}  // namespace dtrain
