// Choosing the checkpoint a run goes on from (see resume.hpp).
#include "train/checkpoint/resume.hpp"

#include <cstdio>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/input_file.hpp"
#include "train/checkpoint/checkpoint.hpp"
#include "train/checkpoint/history.hpp"
#include "train/rank_agreement.hpp"

namespace fs = std::filesystem;

namespace dtrain {

bool in_run_dir(const std::string& ck, const std::string& run_dir) {
  std::error_code ec;
  return fs::equivalent(fs::path(ck).parent_path().parent_path(), run_dir, ec);
}

ResumePlan plan_resume(const std::string& run_dir, bool resume, bool restarted, const std::string& from) {
  const bool holds_run = fs::exists(run_dir + "/config.json");
  require(resume || restarted || !holds_run, "run dir " + run_dir + " already holds a run: continue it with "
                                             "`dtrain train --resume " + run_dir + "`, or choose another --run-dir");
  require(from.empty() || restarted || !holds_run || in_run_dir(from, run_dir),
          "run dir " + run_dir + " already holds another run: resume " + from + " into a new --run-dir");
  ResumePlan plan;
  if (!resume && !restarted) return plan;
  // After dtrun restarted the workers, the run dir's newest good checkpoint (of its line of history);
  // --resume FOLDER starts from that checkpoint (into this or another run dir).
  plan.candidates = checkpoints_of_line(run_dir);
  if (!from.empty() && (plan.candidates.empty() || !restarted)) plan.candidates = {from};
  plan.named = !from.empty() && plan.candidates == std::vector<std::string>{from};
  return plan;
}

std::string load_newest_good(const ResumePlan& plan, const std::string& run_dir, ProcessGroup& all,
                             const std::function<void(const std::string&)>& load) {
  const std::vector<std::string>& candidates = plan.candidates;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& ck = candidates[i];
    std::string damage;
    try {
      load(ck);
    } catch (const CheckpointDamaged& e) {
      damage = e.what();
    }
    double bad = damage.empty() ? 0.0 : 1.0;
    all.allreduce(&bad, 1, ReduceOp::max);
    if (bad == 0.0) return ck;
    if (plan.named || i + 1 == candidates.size()) {
      const std::string what = damage.empty() ? std::string("(another rank named the problem)") : damage;
      throw Error("checkpoint " + ck + " is damaged: " + what +
                  (plan.named ? "; resume from another checkpoint folder, or from its run dir to use the newest good one"
                              : "; no good checkpoint is left in " + run_dir +
                                    "/checkpoints: start afresh with another --run-dir, or resume from a copy you trust"));
    }
    if (!damage.empty()) {
      std::fprintf(stderr, "dtrain: checkpoint %s is damaged: %s; using an older checkpoint\n", ck.c_str(),
                   damage.c_str());
      std::fflush(stderr);
    }
  }
  return "";
}

LoaderPlace place_loader(const TrainerState& st, int64_t B, int dp, int64_t epoch_samples, int64_t grad_accum) {
  const int64_t per_batch = B * dp;
  const int64_t batches = (epoch_samples + per_batch - 1) / per_batch;  // alike on every rank (unpadded)
  const bool whole_epoch = st.samples_in_epoch >= epoch_samples;
  LoaderPlace p;
  p.batch_in_epoch = whole_epoch ? batches : st.samples_in_epoch / per_batch;
  const int64_t global_batch = B * dp * grad_accum;
  const bool exact = whole_epoch || st.samples_in_epoch % per_batch == 0;
  if (!exact || (st.global_batch > 0 && st.global_batch != global_batch)) {
    char note[400];
    std::snprintf(note, sizeof note,
                  "note: the checkpoint was written with a global batch of %lld samples (%lld consumed in epoch "
                  "%lld), this run has %lld: the rest of the epoch is dealt out at the new size, so the trajectory "
                  "differs from the uninterrupted run's%s",
                  (long long)st.global_batch, (long long)st.samples_in_epoch, (long long)st.epoch + 1,
                  (long long)global_batch, exact ? "" : " and some samples may be skipped or seen twice");
    p.note = note;
  }
  return p;
}

namespace {
Json read_config_json(const std::string& path) { return parse_json(read_file(path, kMaxSmallFileBytes, "config"), path); }
}  // namespace

ResumeTarget resume_target(const std::string& given, const std::string& run_dir, bool restarted) {
  namespace fs = std::filesystem;
  const std::string what = strip_slashes(given);  // a tab-completed folder is the folder
  const fs::path parent = fs::path(what).lexically_normal().parent_path();
  const bool in_checkpoints = parent.filename() == "checkpoints";
  if (restarted && in_checkpoints && (run_dir.empty() || run_dir == parent.parent_path().string()) &&
      fs::exists(parent.parent_path() / "config.json")) {
    const std::string run = parent.parent_path().string();
    return {run, what, run + "/config.json", read_config_json(run + "/config.json")};
  }
  if (fs::exists(what + "/config.json")) {  // a run dir
    require(run_dir.empty() || run_dir == what, "--resume " + what + " is a run dir and continues in it: leave "
                                                "out --run-dir, or resume from one of its checkpoints instead");
    return {what, "", what + "/config.json", read_config_json(what + "/config.json")};
  }
  // a checkpoint folder: its run's config, continued in its run dir or in --run-dir
  require(fs::exists(what + "/trainer.json"),
          "--resume " + what + ": neither a run dir (config.json) nor a resumable checkpoint (trainer.json): "
          "give the run dir of an earlier `dtrain train` or one of its RUN/checkpoints/step_… folders");
  const std::string path = what + "/trainer.json";
  const Json saved = parse_json(read_checkpoint_file(what, "trainer.json"), path);
  const std::string run = !run_dir.empty() ? run_dir : in_checkpoints ? parent.parent_path().string() : "";
  require(!run.empty(), "--resume " + what + " is a checkpoint outside a run dir: say where the run goes "
                        "on with --run-dir DIR");
  return {run, what, path, json_at(saved, "config", path)};
}

AutoResume auto_resume(const std::string& run_dir, const Json& config, int requeues) {
  const std::string saved = run_dir + "/config.json";
  if (!fs::exists(saved)) {
    require(requeues == 0, "this job was requeued (SLURM_RESTART_COUNT=" + std::to_string(requeues) + ") but run dir " +
                               run_dir + " holds no run: it was removed or moved, or RUN_DIR changed; restore it, "
                               "or submit a new job to start afresh");
    return AutoResume::start;
  }
  // Keys a requeued job may give otherwise: where the data lies, threads, the progress bar, how it
  // resumes and stops; and a model key given as 0, which the run took from its data (the checkpoint's
  // load compares the data itself).
  const std::string diff = config_differences(config, read_config_json(saved), [&](const std::string& key) {
    if (key == "train.resume" || key == "train.stop_before") return true;
    const auto model = config.find("model");
    if (key.rfind("model.", 0) != 0 || model == config.end()) return false;
    const auto given = model->find(key.substr(6));
    return given != model->end() && given->is_number() && given->get<double>() == 0.0;
  });
  require(diff.empty(), "run dir " + run_dir + " holds a run of another config (" + diff + "): give another "
                        "--run-dir, or go on with that run as it was with `dtrain train --resume " + run_dir + "`");
  return fs::exists(run_dir + "/summary.json") ? AutoResume::finished : AutoResume::go_on;
}

}  // namespace dtrain
