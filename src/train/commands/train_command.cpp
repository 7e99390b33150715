// `dtrain train`: a run from a config, or resumed (--resume: resume_target), on this process's World.
#include <cstdio>
#include <memory>

#include "comm/world.hpp"
#include "train/checkpoint/resume.hpp"
#include "train/commands/commands.hpp"
#include "train/device_setup.hpp"
#include "train/plan/fit_note.hpp"
#include "train/setup.hpp"
#include "train/threads.hpp"
#include "train/trainer.hpp"

namespace dtrain {

int train_command(int argc, char** argv) {
  CommandArgs a = parse_command_args(argc, argv, 2, {}, {"config", "set", "run-dir", "resume"});
  RunConfig cfg;
  const std::string resume = a.get("resume");
  std::string run_dir = a.get("run-dir"), checkpoint;
  const DistEnv env = detect_env();
  if (!resume.empty()) {  // a run dir, a checkpoint folder, or (dtrun's restart) its run's checkpoint
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
  if (run_dir.empty()) run_dir = "runs/latest";
  same_on_every_rank([&] { configure_threads(cfg.train.threads); });  // before anything runs in parallel
  const CommBackend backend =
      same_on_every_rank([&] { return choose_comm_backend(cfg.parallel.backend, runs_on_gpu(cfg.train), env); });
  World world(env, Millis(cfg.parallel.timeout_s * 1000), backend);
  std::unique_ptr<Trainer> t;
  try {
    t = std::make_unique<Trainer>(cfg, run_dir, !resume.empty(), world, checkpoint);
  } catch (const ModelDoesNotFit& e) {  // the planner's best layout of this world that fits, named
    // a GPU's memory as the device says it, planned on the described profile of its kind (its rates
    // rank the layouts; the memory decides which fit); the host's free memory shared by its ranks
    const bool gpu = e.device_bytes > 0;
    const double per_rank =
        gpu ? double(e.device_bytes) : double(available_host_bytes()) / std::max(1, env.local_world_size);
    const std::string profile = !gpu ? "cpu" : e.device.find("A100") != std::string::npos ? "a100" : "h100";
    throw Error(e.what() + fitting_layout_note(cfg, world.size(), per_rank, profile));
  }
  t->run();
  world.shutdown();
  if (world.rank() == 0)
    std::printf("run dir: %s (metrics.jsonl, summary.json, model_best/, model_final/, checkpoints/)\n",
                run_dir.c_str());
  return 0;
}

}  // namespace dtrain
