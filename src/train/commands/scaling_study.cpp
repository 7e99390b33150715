// The scaling study (see scaling_study.hpp): the points planned and checked, each trained by
// `dtrain train` under dtrun or srun, its summary.json read back into scaling.csv and scaling.html.
#include "train/commands/scaling_study.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/output_path.hpp"
#include "metrics/scaling_report.hpp"
#include "train/commands/child_process.hpp"
#include "train/config.hpp"
#include "train/global_batch.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

constexpr int kMaxWorkers = 1 << 20;

struct Point {
  int workers = 1;
  int64_t per_rank_batch = 0, global_batch = 0;
  std::string batch_set;  // the --set that gives the point its batch
  std::string run_dir, log;
};

int64_t gcd(int64_t a, int64_t b) { return b == 0 ? a : gcd(b, a % b); }

// The smallest multiple of every worker count that is at least `batch` (a batch each count divides).
int64_t dividable_batch(const std::vector<int>& counts, int64_t batch) {
  int64_t lcm = 1;
  for (int n : counts) lcm = lcm / gcd(lcm, n) * n;
  return (batch + lcm - 1) / lcm * lcm;
}

// The study's batch, as its settings table shows it: train.global_batch's, else train.batch_size's.
std::pair<std::string, std::string> batch_setting(int64_t global, int64_t batch, bool strong) {
  if (global > 0)
    return {"train.global_batch", std::to_string(global) + (strong ? " (kept at every point)"
                                                                   : " (at the first point, grown with the workers)")};
  return {"train.batch_size", std::to_string(batch) + (strong ? " (the global batch, split)" : " (per rank)")};
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int n : v) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return s;
}

// Trains one point (its output in its log) and adds what its summary.json says to the study.
void run_point(const ScalingOptions& o, const Point& p, const std::vector<std::string>& sets, const std::string& dtrun,
               const std::string& dtrain, const std::string& fix, ScalingStudy& study) {
  std::vector<std::string> args;
  if (o.launcher == "dtrun")
    args = {dtrun, "--standalone", "--nproc-per-node", std::to_string(p.workers), dtrain};
  else
    args = {"srun", "--ntasks", std::to_string(p.workers), "--kill-on-bad-exit=1", dtrain};  // a failed rank ends the step
  args.insert(args.end(), {"train", "--config", o.config});
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  args.insert(args.end(), {"--set", p.batch_set, "--run-dir", p.run_dir});
  const std::string ended = run_logged(args, p.log, fix);
  const std::string point = "point nproc " + std::to_string(p.workers);
  require(ended.empty(), point + " failed (" + ended + "): see its log " + p.log + " (run dir " + p.run_dir + ")");
  const std::string summary = p.run_dir + "/summary.json";
  require(fs::exists(summary), point + " wrote no " + summary + ": see its log " + p.log);
  ScalingPoint pt =
      scaling_point(p.workers, p.per_rank_batch, p.global_batch,
                    parse_json(read_file(summary, kMaxSmallFileBytes), summary), summary);
  pt.run_dir = p.run_dir;
  study.points.push_back(pt);
}

}  // namespace

std::vector<int> parse_worker_counts(const std::string& text) {
  std::vector<int> counts;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(part.c_str(), &end, 10);
    require(!part.empty() && *end == 0 && errno == 0 && n >= 1 && n <= kMaxWorkers,
            "--nproc " + text + ": `" + part + "` is not a worker count: give whole numbers from 1, e.g. --nproc 1,2,4,8");
    require(std::find(counts.begin(), counts.end(), int(n)) == counts.end(),
            "--nproc " + text + " names " + part + " twice: give each worker count once");
    counts.push_back(int(n));
    at = comma + 1;
  }
  std::sort(counts.begin(), counts.end());
  return counts;
}

namespace {

// The run config every point starts from: the study's settings first, so that the user's --set may
// change them (the batch is set per point). `sets` receives them all, in order.
RunConfig study_config(const ScalingOptions& o, std::vector<std::string>& sets) {
  sets = {"train.max_steps=" + std::to_string(o.steps), "train.epochs=0",
          "train.threads=" + std::to_string(o.threads_per_rank), "train.checkpoint_every=0", "train.progress=false"};
  for (const std::string& s : o.sets) {
    require(s.find('=') != std::string::npos, "--set " + s + " is not key=value: write e.g. --set train.lr=0.001");
    sets.push_back(s);
  }
  RunConfig cfg;
  cfg.load_toml(o.config);
  for (const std::string& s : sets) cfg.set(s.substr(0, s.find('=')), s.substr(s.find('=') + 1));
  cfg.validate();
  return cfg;
}

// The point of n workers (of `counts`): its batch per rank and global, and where it runs.
Point plan_point(const ScalingOptions& o, const RunConfig& cfg, const std::vector<int>& counts, int n) {
  const bool strong = o.mode == "strong";
  const int64_t batch = cfg.train.batch_size, accum = cfg.train.grad_accum;
  const int64_t global = cfg.train.global_batch, copy = std::max<int64_t>(1, cfg.parallel.tp * cfg.parallel.pp);
  Point p;
  p.workers = n;
  if (global > 0) {  // train.global_batch: the trainer splits it; strong keeps it, weak grows it with the workers
    const int64_t g = strong ? global : global * n / counts.front();
    require(strong || global * n % counts.front() == 0,
            "weak scaling grows train.global_batch = " + std::to_string(global) + " (at " +
                std::to_string(counts.front()) + " workers) in proportion, which " + std::to_string(n) +
                " workers make fractional: give worker counts that are multiples of the first");
    const BatchSplit split = split_global_batch(g, int(std::max<int64_t>(1, n / copy)), batch);
    p.per_rank_batch = split.micro_batch;
    p.global_batch = g;
    p.batch_set = "train.global_batch=" + std::to_string(g);
  } else if (strong) {
    require(batch % n == 0, "--nproc " + std::to_string(n) + " does not divide train.batch_size = " +
                                std::to_string(batch) + " (strong scaling splits that global batch over the workers): "
                                "give worker counts that divide it, or --set train.batch_size=" +
                                std::to_string(dividable_batch(counts, batch)) + " (every count divides it)");
    p.per_rank_batch = batch / n;
  } else {
    p.per_rank_batch = batch;
  }
  if (global == 0) {
    p.global_batch = p.per_rank_batch * n * accum;
    p.batch_set = "train.batch_size=" + std::to_string(p.per_rank_batch);
  }
  p.run_dir = (fs::path(o.out) / ("nproc_" + std::to_string(n))).string();
  p.log = p.run_dir + ".log";
  require(!fs::exists(p.run_dir + "/config.json"), p.run_dir + " already holds a run (of an earlier study): remove "
                                                   "it, or give the study another --out");
  return p;
}

// Error unless the launcher can start `most` workers; returns what to check when a point fails.
std::string check_launcher(const ScalingOptions& o, const std::string& dtrun, int most) {
  if (o.launcher == "dtrun") {
    require(fs::is_regular_file(dtrun), "dtrun is not beside dtrain (looked for " + dtrun + "): build it "
                                        "(cmake --build build --target dtrun), or use --launcher srun");
    return "check that " + dtrun + " runs";
  }
  require(std::getenv("SLURM_JOB_ID") != nullptr,
          "--launcher srun runs the points inside a Slurm allocation, and SLURM_JOB_ID is not set: start the study "
          "from salloc or an sbatch script with at least " + std::to_string(most) +
          (most == 1 ? " task" : " tasks") + ", or use --launcher dtrun");
  if (const char* tasks = std::getenv("SLURM_NTASKS"))
    require(std::atoi(tasks) >= most,
            "the Slurm allocation has SLURM_NTASKS=" + std::string(tasks) + ", fewer than " + std::to_string(most) +
                " workers: ask for " + std::to_string(most) + " tasks (salloc -n " + std::to_string(most) +
                ") or leave out the larger counts");
  return "srun must be on PATH inside the allocation";
}

// The study's settings as its page lists them.
ScalingStudy new_study(const ScalingOptions& o, const RunConfig& cfg, const std::vector<int>& counts) {
  ScalingStudy study;
  study.mode = o.mode;
  std::string user_sets;
  for (const std::string& s : o.sets) user_sets += (user_sets.empty() ? "" : " ") + s;
  study.settings = {{"config", o.config},
                    {"mode", o.mode},
                    {"workers", join(counts)},
                    {"steps per point", std::to_string(o.steps) + " (step time and throughput leave out the warm-up)"},
                    {"threads per rank", std::to_string(o.threads_per_rank)},
                    {"launcher", o.launcher},
                    batch_setting(cfg.train.global_batch, cfg.train.batch_size, o.mode == "strong"),
                    {"--set", user_sets.empty() ? "–" : user_sets}};
  return study;
}

}  // namespace

void run_scaling_study(const ScalingOptions& o, std::FILE* out) {
  require(o.mode == "strong" || o.mode == "weak",
          "--mode " + o.mode + ": use strong (the global batch stays) or weak (the batch per rank stays)");
  require(o.launcher == "dtrun" || o.launcher == "srun",
          "--launcher " + o.launcher + ": use dtrun (workers on this machine) or srun (inside a Slurm allocation)");
  const std::vector<int> counts = parse_worker_counts(o.nproc);
  std::vector<std::string> sets;
  const RunConfig cfg = study_config(o, sets);
  check_output_folder(o.out, "dtrain scale", holds_only({"scaling.csv", "scaling.html", "nproc_*"}));
  std::vector<Point> points;
  for (int n : counts) points.push_back(plan_point(o, cfg, counts, n));
  const std::string dtrain = program_beside_self("dtrain", "dtrain scale"),
                    dtrun = program_beside_self("dtrun", "dtrain scale");
  const std::string fix = check_launcher(o, dtrun, counts.back());
  std::error_code ec;
  fs::create_directories(o.out, ec);
  require(!ec, "cannot create " + o.out + ": " + ec.message() + "; choose a writable --out");

  ScalingStudy study = new_study(o, cfg, counts);
  const int64_t global = cfg.train.global_batch;
  std::fprintf(out, "scaling study (%s): workers %s; %s batch %lld; %lld steps per point, %d thread%s per rank; in %s\n",
               o.mode.c_str(), join(counts).c_str(), o.mode == "strong" || global > 0 ? "global" : "per-rank",
               (long long)(global > 0 ? global : cfg.train.batch_size), (long long)o.steps, o.threads_per_rank,
               o.threads_per_rank == 1 ? "" : "s", o.out.c_str());
  for (const Point& p : points) {
    std::fprintf(out, "nproc %d: batch %lld per rank, %lld global ... ", p.workers, (long long)p.per_rank_batch,
                 (long long)p.global_batch);
    std::fflush(out);
    try {
      run_point(o, p, sets, dtrun, dtrain, fix, study);
    } catch (const Error&) {
      std::fprintf(out, "failed\n");  // the line goes on, then the error says why
      std::fflush(out);
      throw;
    }
    const ScalingPoint& pt = study.points.back();
    const double speedup = scaling_speedups(study).back();
    std::fprintf(out, "%.0f tokens/s, step %.1f ms, speedup %.2f, efficiency %.0f%%\n", pt.tokens_per_s,
                 1e3 * pt.step_seconds, speedup, 100 * speedup / p.workers);
    write_file_atomic((fs::path(o.out) / "scaling.csv").string(), scaling_csv(study));
    write_file_atomic((fs::path(o.out) / "scaling.html").string(), scaling_html(study));
  }
  std::fprintf(out, "wrote %s/scaling.csv and %s/scaling.html\n", o.out.c_str(), o.out.c_str());
}

}  // namespace dtrain
