// `dtrain sweep`: a grid of hyper-parameters trained as independent `dtrain train` runs, one run dir
// per point, one after another here (--launcher local) or as a SLURM job array (--launcher slurm).
#include "train/commands/sweep_command.hpp"

#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/output_path.hpp"
#include "train/commands/child_process.hpp"
#include "train/commands/commands.hpp"
#include "train/commands/sweep_grid.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

// Every point's config built as `dtrain train` builds it (the config file, the --set's, then the
// point's values as further --set's) and validated; an error names the point.
void validate_points(const CommandArgs& a, const std::string& config, const std::vector<GridPoint>& points) {
  RunConfig base;
  base.load_toml(config);
  apply_sets(base, a);
  for (const GridPoint& p : points) {
    RunConfig cfg = base;
    try {
      for (const auto& [key, value] : p.values) cfg.set(key, value, "--grid");
      cfg.validate();
    } catch (const Error& e) {
      throw Error("sweep point " + p.name + ": " + e.what());
    }
  }
}

SweepRecord sweep_record(const CommandArgs& a, const std::string& config, const std::vector<GridAxis>& axes,
                         const std::vector<GridPoint>& points) {
  SweepRecord r;
  r.config = fs::absolute(config).lexically_normal().string();
  auto [lo, hi] = a.opts.equal_range("set");
  for (auto it = lo; it != hi; ++it) r.sets.push_back(it->second);
  for (const GridAxis& axis : axes) r.grid.emplace_back(axis.key, axis.values);
  r.labels = axis_labels(axes);
  for (const GridPoint& p : points) r.points.push_back({p.name, p.values});
  return r;
}

}  // namespace

std::string SweepPlan::run_dir(const SweepPointRecord& p) const { return (fs::path(out) / p.name).string(); }

SweepPlan plan_sweep(const CommandArgs& a) {
  if (!a.positional.empty())
    throw Error("dtrain sweep takes no argument `" + a.positional[0] + "`: give the grid as --grid \"key=v1,v2 …\"");
  SweepPlan plan;
  const std::string config = a.need("config");
  std::string grid;
  auto [lo, hi] = a.opts.equal_range("grid");  // several --grid add up
  for (auto it = lo; it != hi; ++it) grid += " " + it->second;
  require(lo != hi, "missing --grid: give the values to sweep, e.g. --grid \"train.lr=1e-3,3e-3 model.dim=128,256\"");
  const std::vector<GridAxis> axes = parse_grid(grid);
  const std::vector<GridPoint> points = expand_grid(axes);
  plan.launcher = a.get("launcher", "local");
  require(plan.launcher == "local" || plan.launcher == "slurm",
          "--launcher " + plan.launcher + ": use local (the points one after another here) or slurm (a job array)");
  plan.nproc = int(a.integer("nproc", 1, 1, 1 << 16));
  plan.sbatch_args = a.get("sbatch-args");
  require(plan.sbatch_args.empty() || plan.launcher == "slurm", "--sbatch-args is for --launcher slurm");
  plan.dry_run = a.flag("dry-run");
  plan.out = strip_slashes(a.get("out", "runs/sweep-" + fs::path(config).stem().string()));
  validate_points(a, config, points);
  plan.record = sweep_record(a, config, axes, points);
  check_output_folder(plan.out, "dtrain sweep", [](const std::string& dir) { return is_sweep_dir(dir); });
  if (is_sweep_dir(plan.out)) {
    const SweepRecord before = read_sweep_record(plan.out);
    require(before.same_sweep(plan.record), "--out " + plan.out + " holds another sweep (" + before.describe() +
                                                "): give this one another --out");
  }
  return plan;
}

std::vector<std::string> point_train_args(const SweepPlan& plan, const SweepPointRecord& p, const std::string& run_dir) {
  std::vector<std::string> args{"train", "--config", plan.record.config, "--run-dir", run_dir, "--resume", "auto"};
  for (const std::string& s : plan.record.sets) args.insert(args.end(), {"--set", s});
  for (const auto& [key, value] : p.values) args.insert(args.end(), {"--set", key + "=" + value});
  return args;
}

std::vector<std::string> point_launcher(const SweepPlan& plan) {
  const std::string dtrain = program_beside_self("dtrain", "dtrain sweep");
  if (plan.nproc == 1) return {dtrain};
  const std::string dtrun = program_beside_self("dtrun", "dtrain sweep");
  require(fs::is_regular_file(dtrun), "dtrun is not beside dtrain (looked for " + dtrun + "), and --nproc " +
                                          std::to_string(plan.nproc) + " starts each point under it: build it "
                                          "(cmake --build build --target dtrun), or sweep with --nproc 1");
  return {dtrun, "--standalone", "--nproc-per-node", std::to_string(plan.nproc), dtrain};
}

int sweep_command(int argc, char** argv) {
  CommandArgs a = parse_command_args(argc, argv, 2, {"dry-run"},
                                     {"config", "grid", "set", "out", "launcher", "nproc", "sbatch-args"});
  const SweepPlan plan = plan_sweep(a);
  const std::vector<std::string> launcher = point_launcher(plan);
  return plan.launcher == "local" ? run_sweep_locally(plan, launcher) : submit_sweep_array(plan, launcher);
}

}  // namespace dtrain
