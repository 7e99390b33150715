// `dtrain ckpt inspect|verify|export|import`: a checkpoint looked into, checked and converted.
#include <cstdio>

#include "train/checkpoint/checkpoint_tools.hpp"
#include "train/commands/commands.hpp"

namespace dtrain {

int ckpt_command(int argc, char** argv) {
  require(argc >= 4, "usage: dtrain ckpt inspect|verify|export|import …: see `dtrain --help`");
  const std::string sub = argv[2];
  CommandArgs a = parse_command_args(argc, argv, 3, {"optimizer"}, {"out", "config", "vocab"});
  require(a.positional.size() == 1, "dtrain ckpt " + sub + " takes one folder or file: see `dtrain --help`");
  const std::string what = a.positional[0];
  if (sub == "inspect") {
    std::fputs(inspect_checkpoint(what).c_str(), stdout);
    return 0;
  }
  if (sub == "verify") {
    const std::vector<std::string> problems = verify_checkpoint_folder(what);
    if (problems.size() == 1)
      throw Error("checkpoint " + what + " is damaged: " + problems[0] + "; resume from an older one");
    for (const std::string& p : problems) std::fprintf(stderr, "dtrain: %s\n", p.c_str());
    require(problems.empty(), "checkpoint " + what + " is damaged (" + std::to_string(problems.size()) +
                                  " problems above): resume from an older one");
    std::printf("checkpoint %s: every chunk and file matches its checksum\n", what.c_str());
    return 0;
  }
  if (sub == "export") {
    const std::string out = a.need("out");
    export_checkpoint(what, out, a.flag("optimizer"));
    std::printf("exported %s to %s (and its model config to %s)\n", what.c_str(), out.c_str(),
                exported_config_path(out).c_str());
    return 0;
  }
  require(sub == "import", "unknown command `dtrain ckpt " + sub + "`: use inspect, verify, export or import");
  const std::string out = a.need("out");
  import_checkpoint(what, a.need("config"), out, a.get("vocab"));
  std::printf("imported %s as checkpoint %s (start from it with --set train.init_from=%s)\n", what.c_str(), out.c_str(),
              out.c_str());
  return 0;
}

}  // namespace dtrain
