// `dtrain data stage DIR --to TARGET`: the copy a run with data.stage = TARGET makes before training,
// by hand (e.g. once per node in a job script before the launch).
#include <cstdio>

#include "data/stage.hpp"
#include "train/commands/commands.hpp"

namespace dtrain {

int stage_data_command(int argc, char** argv) {
  const CommandArgs a = parse_command_args(argc, argv, 3, {}, {"to"});
  require(a.positional.size() == 1, "usage: dtrain data stage DIR --to TARGET (e.g. --to /dev/shm/$USER)");
  const StageResult r = stage_data(a.positional[0], a.need("to"));
  std::printf("%s %s (%.1f MiB, %lld files) in %.1f s\n", r.copied ? "staged to" : "already staged at",
              r.dir.c_str(), double(r.bytes) / (1 << 20), (long long)r.files, r.seconds);
  return 0;
}

}  // namespace dtrain
