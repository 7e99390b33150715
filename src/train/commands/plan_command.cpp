// `dtrain plan`: a pipeline schedule (generated, or a user's list) validated, simulated and shown.
#include <cstdio>

#include "core/atomic_file.hpp"
#include "core/output_path.hpp"
#include "metrics/chrome_trace.hpp"
#include "parallel/pp/schedule.hpp"
#include "train/commands/commands.hpp"
#include "train/commands/plan_job.hpp"
#include "train/report/run_report.hpp"

namespace dtrain {

int plan_command(int argc, char** argv) {
  CommandArgs a = parse_command_args(argc, argv, 2, {"json", "calibrate"},
                                     {"pp", "microbatches", "schedule", "virtual", "file", "save", "trace", "costs",
                                      "config", "set", "world", "hardware", "top", "mesh", "ranks-per-node", "threads"});
  if (!a.get("config").empty() || a.flag("calibrate")) return plan_job_command(a);
  if (!a.positional.empty())
    throw Error("dtrain plan takes no argument `" + a.positional[0] + "`: see `dtrain --help`");
  const ActionCosts costs = a.get("costs").empty() ? ActionCosts{} : parse_action_costs(a.get("costs"));
  for (const char* k : {"save", "trace"})
    if (!a.get(k).empty()) check_output_file(a.get(k), std::string("--") + k);
  Schedule s;
  const std::string file = a.get("file");
  if (!file.empty()) {
    for (const char* k : {"pp", "microbatches", "schedule", "virtual"})
      require(a.get(k).empty(), std::string("--") + k + " with --file: the list gives its own shape; leave out --" + k);
    s = read_schedule(file);
  } else {
    const std::string name = a.need("schedule");
    const int default_virtual = name == "interleaved-1f1b" || name == "zb-v" ? 2 : 1;
    a.need("pp");  // both required without --file
    a.need("microbatches");
    s = make_schedule(name, int(a.integer("pp", 0, 1, kMaxPipelineRanks)),
                      int(a.integer("virtual", default_virtual, 1, kMaxVirtualStages)),
                      int(a.integer("microbatches", 0, 1, kMaxMicrobatches)));
  }
  require(costs.stages.empty() || int(costs.stages.size()) == s.stages(),
          "--costs gives " + std::to_string(costs.stages.size()) + " stages' costs, the schedule has " +
              std::to_string(s.stages()) + " stages: give one F,B,I,W per stage (joined by ';'), or one for all");
  const std::vector<std::string> problems = validate(s);
  for (const std::string& p : problems) std::fprintf(stderr, "dtrain: %s\n", p.c_str());
  require(problems.empty(),
          "schedule " + s.name + " is not valid (" +
              (problems.size() > kMaxProblemsListed ? std::string("the problems above")
                                                    : std::to_string(problems.size()) + " problems above") +
              "): fix the lists, or start from one that `dtrain plan --save` writes");
  const Simulation sim = simulate(s, costs);
  std::fputs(render_grid(s, sim).c_str(), stdout);
  std::printf("%s\n", cpu_bf16_warning().empty() ? "this CPU has native bf16: train.precision = bf16 is fast here"
                                                 : cpu_bf16_warning().c_str());
  if (const std::string save = a.get("save"); !save.empty()) {
    write_file_atomic(save, write_schedule(s));
    std::printf("wrote the lists to %s (edit them and check with dtrain plan --file %s)\n", save.c_str(), save.c_str());
  }
  if (const std::string trace = a.get("trace"); !trace.empty()) {
    std::vector<TraceEvent> events;
    for (int r = 0; r < s.pp; ++r)
      for (const TimedAction& t : sim.ranks[r])  // one time unit shown as one millisecond
        events.push_back({r, "compute", to_string(t.action), t.start * 1e-3, (t.end - t.start) * 1e-3, ""});
    write_chrome_trace(trace, events);
    std::printf("wrote the simulated timeline to %s (open it in ui.perfetto.dev; 1 time unit = 1 ms)\n", trace.c_str());
  }
  return 0;
}

}  // namespace dtrain
