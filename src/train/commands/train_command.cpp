// `dtrain train`: a run from a config, or resumed (--resume: resume_target; --resume auto:
// auto_resume), on this process's World; exits kExitSavedForRequeue when it stopped before its job's end.
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "comm/world.hpp"
#include "core/cpu_share.hpp"
#include "core/host_name.hpp"
#include "core/job_exit.hpp"
#include "core/log_level.hpp"
#include "train/checkpoint/resume.hpp"
#include "train/commands/commands.hpp"
#include "train/device_setup.hpp"
#include "train/job_stop.hpp"
#include "train/plan/fit_note.hpp"
#include "train/report/run_dir.hpp"
#include "train/setup.hpp"
#include "train/threads.hpp"
#include "train/trainer.hpp"

namespace dtrain {

namespace {

int requeues_of_job() {
  const char* v = std::getenv("SLURM_RESTART_COUNT");
  return v && *v ? std::atoi(v) : 0;
}

// DTRAIN_LOG_LEVEL=debug: where this rank stands, one line from every rank (stderr, so it is kept apart).
void say_placement(World& world) {
  const DistEnv& env = world.env();
  const char* why = std::getenv("DTRAIN_THREADS_WHY");
  const char* job = std::getenv("SLURM_JOB_ID");
  const std::string store = !env.store_dir.empty() ? "file store " + env.store_dir
                                                   : "store " + env.master_addr + ":" + std::to_string(env.master_port);
  std::fprintf(stderr, "dtrain: debug: %s on %s, pid %d; %s%s; %s; OpenMP threads %d (%s) on CPUs %s; restart %d%s%s\n",
               env.describe().c_str(), host_name().c_str(), int(getpid()), store.c_str(),
               env.store_prefix.empty() ? "" : (" under " + env.store_prefix).c_str(), world.describe_backend().c_str(),
               omp_get_max_threads(), why && *why ? why : "train.threads, OMP_NUM_THREADS or the CPUs",
               format_cpu_list(read_cpu_facts().mask).c_str(), env.restart_count, job ? ", SLURM job " : "",
               job ? (std::string(job) + " requeued " + std::to_string(requeues_of_job()) + " times").c_str() : "");
}

// --resume auto, decided by rank 0 (the run dir is shared; a rank that looked after rank 0 wrote
// config.json would decide otherwise) and told to every rank; each throws the same error.
AutoResume agreed_auto_resume(World& world, const std::string& run_dir, const RunConfig& cfg) {
  std::string said;
  if (world.rank() == 0) {
    try {
      said = std::to_string(int(auto_resume(run_dir, cfg.to_json(), requeues_of_job())));
    } catch (const Error& e) {
      said = std::string("E") + e.what();
    }
  }
  if (world.size() > 1) said = world.allgather_text(said, 1024)[0];
  if (said[0] == 'E') throw ConfigError(said.substr(1));  // every restart would meet it again
  return AutoResume(std::stoi(said));
}

// The run's trainer; a model that does not fit gets the planner's best layout of this world that fits.
std::unique_ptr<Trainer> make_trainer(const RunConfig& cfg, const std::string& run_dir, bool resume, World& world,
                                      const std::string& checkpoint) {
  try {
    return std::make_unique<Trainer>(cfg, run_dir, resume, world, checkpoint);
  } catch (const ModelDoesNotFit& e) {
    // a GPU's memory as the device says it, planned on the described profile of its kind (its rates
    // rank the layouts; the memory decides which fit); the host's free memory shared by its ranks
    const bool gpu = e.device_bytes > 0;
    const double per_rank = gpu ? double(e.device_bytes)
                                : double(available_host_bytes()) / std::max(1, world.env().local_world_size);
    const std::string profile = !gpu ? "cpu" : e.device.find("A100") != std::string::npos ? "a100" : "h100";
    throw Error(e.what() + fitting_layout_note(cfg, world.size(), per_rank, profile));
  }
}

}  // namespace

int train_command(int argc, char** argv) {
  catch_stop_signals();  // a job's warning that comes during setup is kept for the first step
  process_log_level();   // a bad DTRAIN_LOG_LEVEL stops here, in one line
  CommandArgs a = parse_command_args(argc, argv, 2, {}, {"config", "set", "run-dir", "resume"});
  RunConfig cfg;
  const std::string resume = a.get("resume");
  std::string run_dir = a.get("run-dir"), checkpoint;
  const DistEnv env = detect_env();
  bool automatic = resume == "auto";
  if (!resume.empty() && !automatic) {  // a run dir, a checkpoint folder, or (dtrun's restart) its run's checkpoint
    const ResumeTarget target = resume_target(resume, run_dir, env.restart_count > 0);
    cfg.apply_json(target.config, target.config_source);
    run_dir = target.run_dir;
    checkpoint = target.checkpoint;
  } else {
    same_on_every_rank([&] { cfg.load_toml(a.need("config")); });
  }
  same_on_every_rank([&] {
    apply_sets(cfg, a);
    cfg.validate();
  });
  automatic = automatic || (resume.empty() && cfg.train.resume == "auto");
  if (automatic) cfg.train.resume = "auto";
  if (run_dir.empty()) run_dir = "runs/latest";
  if (env.rank == 0) warn_if_scratch(run_dir);
  same_on_every_rank([&] { configure_threads(cfg.train.threads); });  // before anything runs in parallel
  const CommBackend backend =
      same_on_every_rank([&] { return choose_comm_backend(cfg.parallel.backend, runs_on_gpu(cfg.train), env); });
  World world(env, Millis(cfg.parallel.timeout_s * 1000), backend);
  if (logs_at(LogLevel::debug)) say_placement(world);
  bool resuming = !resume.empty() && !automatic;
  if (automatic) {
    const AutoResume what = agreed_auto_resume(world, run_dir, cfg);
    if (what == AutoResume::finished) {
      if (world.rank() == 0) std::printf("run dir %s: its run is finished (summary.json): nothing to do\n", run_dir.c_str());
      world.shutdown();
      return 0;
    }
    resuming = what == AutoResume::go_on;
  }
  const std::unique_ptr<Trainer> t = make_trainer(cfg, run_dir, resuming, world, checkpoint);
  const RunEnd end = t->run();
  world.shutdown();
  if (end == RunEnd::stopped_to_requeue) return kExitSavedForRequeue;
  if (world.rank() == 0 && logs_at(LogLevel::info))
    std::printf("run dir: %s (metrics.jsonl, summary.json, model_best/, model_final/, checkpoints/)\n",
                run_dir.c_str());
  return 0;
}

}  // namespace dtrain
