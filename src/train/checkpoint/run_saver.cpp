// RunSaver (see run_saver.hpp).
#include "train/checkpoint/run_saver.hpp"

#include <cstdio>

#include "train/checkpoint/checkpoint.hpp"

namespace dtrain {

RunSaver::RunSaver(World& world, DeviceMesh& mesh, ParallelModel& par, const RunConfig& cfg, std::string run_dir,
                   DataSource::KeptFile kept)
    : world_(world), mesh_(mesh), par_(par), cfg_(cfg), run_dir_(std::move(run_dir)),
      kept_(std::move(kept)), writer_(world.all(), double(cfg.parallel.timeout_s)) {}

RunSaver::Checkpoint RunSaver::checkpoint(const TrainerState& state, bool may_background) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%09lld", (long long)state.global_step);
  const std::string& f = cfg_.train.checkpoint_format;
  Checkpoint c;
  c.dir = run_dir_ + "/checkpoints/" + name;
  c.async = cfg_.train.checkpoint_async && may_background;
  c.sharded = f == "sharded" || (f == "auto" && (world_.size() > 1 || cfg_.train.checkpoint_async));
  const int64_t keep = cfg_.train.keep_checkpoints;
  const std::string run_dir = run_dir_;
  c.report = save(c.dir, true, state, c.sharded, c.async, [run_dir, keep] { prune_checkpoints(run_dir, keep); });
  if (c.async) background_step_ = state.global_step;
  return c;
}

void RunSaver::weights(const std::string& name, const TrainerState& state) {
  save(run_dir_ + "/" + name, false, state, false, false, {});
}

std::pair<int64_t, double> RunSaver::finish_background() {
  const double seconds = writer_.wait();
  const int64_t step = background_step_;
  background_step_ = -1;
  return {step, seconds};
}

SaveReport RunSaver::save(const std::string& dir, bool with_optimizer, const TrainerState& state, bool sharded,
                          bool async, std::function<void()> after_commit) {
  writer_.wait();  // one save at a time (the caller has logged the one in flight: finish_background)
  const MeshShape& m = mesh_.shape();
  const int dp = m.dp(), dp_rank = mesh_.coord().dp_index(m);
  FullyShardedDataParallel* fsdp = par_.fsdp();
  SaveRequest r;
  r.dir = dir;
  r.model = cfg_.model;
  r.tp_slice = par_.tp_slice();
  // Pipeline (expert) parallel: no rank holds every stage (expert), so each writes its own (the
  // sharded format, which eval, generate, init_from and `dtrain ckpt export` read like the full one).
  r.sharded = sharded || m.pp > 1 || m.ep > 1;
  r.async = async;
  r.with_optimizer = with_optimizer;
  r.state = &state;
  r.run_config = cfg_.to_json();
  r.kept_name = kept_.name;
  r.kept_path = kept_.path;
  r.saved_from = {{"world", world_.size()}, {"pp", m.pp}, {"dp_replicate", m.dp_replicate},
                  {"dp_shard", m.dp_shard}, {"tp", m.tp}};
  if (m.cp > 1) r.saved_from["cp"] = m.cp;
  if (m.ep > 1) r.saved_from["ep"] = m.ep;
  // ranks holding the same values split the writing: DDP's replicas (context-parallel ranks are
  // replicas too), HSDP's replicas of a shard (FSDP shards over dp_shard × cp)
  r.part = fsdp ? mesh_.coord().dp_replicate : dp_rank * m.cp + mesh_.coord().cp;
  r.parts = fsdp ? m.dp_replicate : dp * m.cp;
  // expert units: the replicas of an expert shard likewise; replicated, the ranks holding the same experts
  r.expert_part = fsdp ? r.part : mesh_.expert_replicas().rank();
  r.expert_parts = fsdp ? r.parts : mesh_.expert_replicas().size();
  r.tp = m.tp > 1 ? &mesh_.group(MeshDim::tp) : nullptr;
  r.after_commit = std::move(after_commit);
  return writer_.save(r, par_.model(), fsdp, &par_.optimizer());
}

}  // namespace dtrain
