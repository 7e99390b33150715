// The two ways `dtrain sweep` runs its points (see sweep_command.hpp): one after another in this
// process's children, or as a SLURM job array whose tasks requeue themselves after a timely save.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/job_exit.hpp"
#include "core/shell_word.hpp"
#include "train/commands/child_process.hpp"
#include "train/commands/sweep_command.hpp"
#include "requeue_script.hpp"  // generated from examples/slurm/requeue.sh

namespace fs = std::filesystem;

namespace dtrain {

namespace {

// The last line of a log that says something (at most 300 bytes of it), "" when there is none.
std::string last_log_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last.size() > 300 ? last.substr(0, 300) + "…" : last;
}

// ", best validation loss 5.1234" (or accuracy) when the run has one yet.
std::string best_figure(const PointState& s) {
  char text[64];
  if (s.classifier && std::isfinite(s.best_accuracy))
    std::snprintf(text, sizeof text, ", best validation accuracy %.2f%%", 100 * s.best_accuracy);
  else if (std::isfinite(s.best_loss))
    std::snprintf(text, sizeof text, ", best validation loss %.4f", s.best_loss);
  else
    return "";
  return text;
}

// "1 point", "4 points".
std::string count_of(size_t n, const std::string& thing) {
  return std::to_string(n) + " " + thing + (n == 1 ? "" : "s");
}

void create_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  require(!ec, "cannot create " + dir + ": " + ec.message() + "; choose a writable --out");
}

// Runs one point to its end (its output appended to RUN/train.log) and says how it ended; the exit
// status goes to DIR/status/NAME for `dtrain report`.
ChildEnd run_point(const SweepPlan& plan, const SweepPointRecord& p, const std::vector<std::string>& launcher,
                   const std::string& tag) {
  const std::string run_dir = plan.run_dir(p), log = run_dir + "/train.log";
  const bool resumed = fs::exists(run_dir + "/config.json");
  create_folder(run_dir);
  const std::string status = sweep_status_path(plan.out, p.name);
  fs::remove(status);
  std::printf("%s: %s (log %s)\n", tag.c_str(), resumed ? "resumed" : "started", log.c_str());
  std::vector<std::string> argv = launcher;
  for (const std::string& w : point_train_args(plan, p, run_dir)) argv.push_back(w);
  const auto start = std::chrono::steady_clock::now();
  const ChildEnd end = run_logged_to_end(argv, log, "check that " + launcher[0] + " runs", true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_file_atomic(status, std::to_string(end.status) + "\n");
  if (end.status == 0)
    std::printf("%s: finished in %.1f s%s\n", tag.c_str(), seconds,
                best_figure(read_point_state(plan.out, p.name)).c_str());
  else if (end.status == kExitSavedForRequeue)
    std::printf("%s: stopped after saving (exit status %d): run the same command again to go on\n", tag.c_str(),
                end.status);
  else
    std::printf("%s: failed (%s): %s\n", tag.c_str(), end.how.c_str(), last_log_line(log).c_str());
  return end;
}

}  // namespace

int run_sweep_locally(const SweepPlan& plan, const std::vector<std::string>& launcher) {
  const std::vector<SweepPointRecord>& points = plan.record.points;
  const std::string n = std::to_string(points.size());
  if (plan.dry_run) {
    std::printf("dtrain sweep --dry-run: %s would run one after another, each into its train.log:\n",
                count_of(points.size(), "point").c_str());
    for (const SweepPointRecord& p : points) {
      std::vector<std::string> argv = launcher;
      for (const std::string& w : point_train_args(plan, p, plan.run_dir(p))) argv.push_back(w);
      std::printf("%s\n", shell_line(argv).c_str());
    }
    return 0;
  }
  create_folder(plan.out + "/status");
  write_sweep_record(plan.out, plan.record);
  std::printf("sweep of %s into %s, one after another\n", count_of(points.size(), "point").c_str(), plan.out.c_str());
  std::vector<std::string> failed;
  size_t done = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const SweepPointRecord& p = points[i];
    const std::string tag = "[" + std::to_string(i + 1) + "/" + n + "] " + p.name;
    if (run_finished(plan.run_dir(p))) {
      std::printf("%s: finished before, skipped%s\n", tag.c_str(), best_figure(read_point_state(plan.out, p.name)).c_str());
      ++done;
      continue;
    }
    const ChildEnd end = run_point(plan, p, launcher, tag);
    if (end.status == kExitSavedForRequeue || end.status == 128 + SIGINT || end.status == 128 + SIGTERM)
      throw Error("the sweep stopped at point " + p.name + " (" + end.how + "), " + std::to_string(done) + " of " + n +
                  " points finished: run the same command again to go on");
    if (end.status == 0)
      ++done;
    else
      failed.push_back(p.name);
  }
  if (!failed.empty()) {
    std::string names;
    for (const std::string& f : failed) names += (names.empty() ? "" : ", ") + f;
    throw Error(std::to_string(failed.size()) + " of " + n + " points failed (" + names + "): see their train.log in " +
                plan.out + "; run the same command again to retry them (finished points are skipped)");
  }
  std::printf("sweep done: %s finished; `dtrain report %s` ranks %s\n",
              points.size() == 1 ? "its point" : ("all " + n + " points").c_str(), plan.out.c_str(),
              points.size() == 1 ? "it" : "them");
  return 0;
}

namespace {

// DIR/points.txt: a line per point, task K's on line K+1: the point's name, then its `dtrain train`
// arguments, as shell words.
std::string points_file(const SweepPlan& plan, const std::string& dir) {
  std::string text;
  for (const SweepPointRecord& p : plan.record.points) {
    std::vector<std::string> words{p.name};
    for (const std::string& w : point_train_args(plan, p, (fs::path(dir) / p.name).string())) words.push_back(w);
    text += shell_line(words) + "\n";
  }
  return text;
}

// DIR/sweep.sbatch: the job array; `dir` absolute.
std::string sbatch_script(const SweepPlan& plan, const std::vector<std::string>& launcher, const std::string& dir) {
  std::ostringstream s;
  s << "#!/bin/bash\n"
       "# A dtrain sweep as a job array, written by `dtrain sweep --launcher slurm` (docs/sweeps.md): task K\n"
       "# runs line K+1 of points.txt (the point's name, then its `dtrain train` arguments) with srun, and\n"
       "# requeues itself when the run saved before the time limit (exit status 79: requeue.sh, as in\n"
       "# dtrain's examples/slurm/). The points' ranking:\n"
    << "#   dtrain report " << shell_word(dir) << "\n"
    << "#SBATCH --job-name=sweep-" << fs::path(dir).filename().string() << "\n"
    << "#SBATCH --array=0-" << plan.record.points.size() - 1 << "\n"
    << "#SBATCH --ntasks=1\n"
    << "#SBATCH --cpus-per-task=" << plan.nproc << "\n"
    << "#SBATCH --time=02:00:00\n"
    << "#SBATCH --output=" << dir << "/logs/%A_%a.out\n"
    << "#SBATCH --open-mode=append\n"  // a requeued task's output follows its earlier starts
    << "#SBATCH --requeue\n"
    << "#SBATCH --signal=B:USR1@120\n"
    << "set -uo pipefail\n"
    << "sweep_dir=" << shell_word(dir) << "\n"
    << R"SH(line=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" "$sweep_dir/points.txt")
[ -n "$line" ] || { echo "dtrain sweep: no point $SLURM_ARRAY_TASK_ID in $sweep_dir/points.txt" >&2; exit 2; }
eval "set -- $line"
name=$1
shift
mkdir -p "$sweep_dir/status" && rm -f "$sweep_dir/status/$name"
echo "sweep point $name: task $SLURM_ARRAY_TASK_ID of job $SLURM_ARRAY_JOB_ID (requeued ${SLURM_RESTART_COUNT:-0} times) on $(hostname)"
source "$sweep_dir/requeue.sh"  # run_requeued: passes the warning on, requeues the task on exit 79
rc=0
run_requeued srun --ntasks=1 )SH"
    << shell_line(launcher) << R"SH( "$@" || rc=$?
echo "$rc" >"$sweep_dir/status/$name"
[ "$rc" -ne 79 ] || exit 0  # requeued: it goes on from its checkpoint
exit "$rc"
)SH";
  return s.str();
}

// The job id `sbatch --parsable` wrote ("ID" or "ID;CLUSTER", among any warnings), "" if none.
std::string parsable_job_id(const std::string& log) {
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const std::string id = line.substr(0, line.find(';'));
    if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos) return id;
  }
  return "";
}

// Whether `program` is found on PATH.
bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  std::string d;
  while (std::getline(dirs, d, ':'))
    if (!d.empty() && ::access((fs::path(d) / program).c_str(), X_OK) == 0) return true;
  return false;
}

}  // namespace

int submit_sweep_array(const SweepPlan& plan, const std::vector<std::string>& launcher) {
  const std::string dir = fs::absolute(plan.out).lexically_normal().string();
  require(dir.find_first_of(" \t\n") == std::string::npos,
          "--out " + plan.out + " holds white space, which a #SBATCH --output line cannot: choose another --out");
  require(plan.dry_run || on_path("sbatch"), "sbatch is not on PATH: run --launcher slurm on a SLURM login node, or "
                                             "add --dry-run to write the job script without submitting it");
  std::vector<std::string> sbatch{"sbatch", "--parsable"};
  std::istringstream extra(plan.sbatch_args);
  for (std::string w; extra >> w;) sbatch.push_back(w);
  sbatch.push_back(dir + "/sweep.sbatch");
  create_folder(dir + "/logs");
  create_folder(dir + "/status");
  write_sweep_record(plan.out, plan.record);
  write_file_atomic(dir + "/points.txt", points_file(plan, dir));
  write_file_atomic(dir + "/requeue.sh", kRequeueScript);
  write_file_atomic(dir + "/sweep.sbatch", sbatch_script(plan, launcher, dir));
  ::chmod((dir + "/sweep.sbatch").c_str(), 0755);
  if (plan.dry_run) {
    std::printf("dtrain sweep --dry-run: wrote %s/sweep.sbatch (%s) and %s/points.txt; submit with:\n%s\n",
                plan.out.c_str(), count_of(plan.record.points.size(), "array task").c_str(), plan.out.c_str(),
                shell_line(sbatch).c_str());
    return 0;
  }
  const std::string log = dir + "/logs/sbatch.out";
  const ChildEnd end = run_logged_to_end(sbatch, log, "check that sbatch runs");
  const std::string job = parsable_job_id(log);
  require(end.status == 0 && !job.empty(), "sbatch refused the sweep (" + (end.status ? end.how : "no job id") + "): " +
                                               last_log_line(log) + "; fix --sbatch-args, or edit " + plan.out +
                                               "/sweep.sbatch and submit it yourself");
  std::printf("submitted job array %s (%s, one per point) from %s/sweep.sbatch\n", job.c_str(),
              count_of(plan.record.points.size(), "task").c_str(), plan.out.c_str());
  std::printf("watch it with `squeue -j %s`; outputs in %s/logs; `dtrain report %s` ranks the points\n", job.c_str(),
              plan.out.c_str(), plan.out.c_str());
  return 0;
}

}  // namespace dtrain
