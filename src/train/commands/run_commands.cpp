// The smaller commands: `dtrain debug dump`, `report` (of runs or a sweep), `scale` and `config keys`; and the rank a
// message is said by.
#include <cstdio>
#include <filesystem>

#include "comm/world.hpp"
#include "metrics/html_report.hpp"
#include "train/commands/commands.hpp"
#include "train/commands/debug_dump.hpp"
#include "train/commands/scaling_study.hpp"
#include "train/report/sweep_report.hpp"
#include "train/threads.hpp"

namespace dtrain {

int debug_command(int argc, char** argv) {
  require(argc >= 3 && std::string(argv[2]) == "dump", "usage: dtrain debug dump …: see `dtrain --help`");
  CommandArgs a = parse_command_args(argc, argv, 3, {}, {"config", "set", "out", "steps"});
  RunConfig cfg;
  cfg.load_toml(a.need("config"));
  apply_sets(cfg, a);
  configure_threads(cfg.train.threads);
  dump_parity(cfg, a.need("out"), a.integer("steps", 20, 1, kMaxCount));
  return 0;
}

// dtrain report: one HTML page about one run or several overlaid; or about a sweep's points
// (DIR/sweep.json), ranked first, and the ranking printed too.
int report_command(int argc, char** argv) {
  CommandArgs a = parse_command_args(argc, argv, 2, {}, {"out"});
  require(!a.positional.empty(), "dtrain report needs a run dir: dtrain report RUN [RUN ...] [--out FILE]");
  const std::string out = a.get("out", default_report_path(a.positional));
  if (a.positional.size() == 1 && is_sweep_dir(a.positional[0])) {
    const std::string& dir = a.positional[0];
    const SweepRanking ranking = rank_sweep(dir);
    std::vector<std::string> started;
    for (const SweepRow& row : ranking.rows)
      if (row.state.has_records)
        started.push_back((std::filesystem::path(dir) / ranking.record.points[row.point].name).string());
    write_run_report(started, out, sweep_table_html(ranking, dir));
    std::fputs(sweep_table_text(ranking).c_str(), stdout);
  } else {
    write_run_report(a.positional, out);
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

// dtrain scale: a scaling study over worker counts (docs/watching.md).
int scale_command(int argc, char** argv) {
  CommandArgs a = parse_command_args(
      argc, argv, 2, {}, {"config", "nproc", "mode", "threads-per-rank", "steps", "set", "launcher", "out"});
  if (!a.positional.empty())
    throw Error("dtrain scale takes no argument `" + a.positional[0] + "`: see `dtrain --help`");
  ScalingOptions o;
  o.config = a.need("config");
  o.nproc = a.need("nproc");
  o.out = a.need("out");
  o.mode = a.get("mode", o.mode);
  o.launcher = a.get("launcher", o.launcher);
  o.threads_per_rank = int(a.integer("threads-per-rank", o.threads_per_rank, 1, 1 << 16));
  o.steps = a.integer("steps", o.steps, 1, kMaxCount);
  auto [lo, hi] = a.opts.equal_range("set");
  for (auto it = lo; it != hi; ++it) o.sets.push_back(it->second);
  run_scaling_study(o, stdout);
  return 0;
}

int config_command(int argc, char** argv) {
  require(argc == 3 && std::string(argv[2]) == "keys",
          "usage: dtrain config keys (every key, its default and "
          "meaning): see `dtrain --help`");
  std::fputs(RunConfig::describe_keys().c_str(), stdout);
  return 0;
}

// This process's global rank (0 for a single process, or when the launcher's variables are bad).
int rank_or_zero() {
  try {
    return detect_env().rank;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace dtrain
