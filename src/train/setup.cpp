// TrainingParts (see setup.hpp): a run's parts, built in order on every rank.
#include "train/setup.hpp"

#include <algorithm>
#include <cstdio>

#include "core/atomic_file.hpp"
#include "core/cuda_backend.hpp"
#include "core/limits.hpp"
#include "core/log_level.hpp"
#include "data/mix.hpp"
#include "data/sampler.hpp"
#include "models/registry.hpp"
#include "train/checkpoint/history.hpp"
#include "train/checkpoint/resume.hpp"
#include "train/device_setup.hpp"
#include "train/model_plan.hpp"
#include "train/rank_agreement.hpp"
#include "train/report/memory_account.hpp"

namespace dtrain {

TrainingParts::TrainingParts(RunConfig c, std::string dir, bool resume, const std::string& from, World& w)
    : start_rss(resident_bytes()),
      cfg(std::move(c)),
      run_dir(std::move(dir)),
      world(w),
      root(w.rank() == 0),
      kind(kind_of(cfg.model)),
      data(same_on_every_rank([&] { return open_run_data(cfg.data, kind.sample_shape(cfg.model).input, w.rank() == 0); })),
      new_nodes(w) {
  open_data();
  require_same_run_on_every_rank(world, cfg.to_json(), data->fingerprint());
  if (root) lock = std::make_unique<RunDirLock>(run_dir);  // one writer, before anything reads the run dir
  dev = open_device(cfg.train, world);
  watch = std::make_unique<JobWatch>(cfg.train, world, *dev, run_dir);
  mesh = std::make_unique<DeviceMesh>(world, mesh_shape_of_config(), backend_factory());
  build_model();
  make_log_and_savers();
  const bool same_run = start_from(resume, from);
  parallel->broadcast_parameters();  // DDP: every replica starts from data-parallel rank 0's weights
  world.all().barrier();             // every rank has checked the run dir before rank 0 writes into it
  if (root) open_run_dir(resume && same_run, resume);
}

TrainingParts::~TrainingParts() = default;

// The run log (opened by rank 0 with the run dir), the saver and the evaluator, with their cadence.
void TrainingParts::make_log_and_savers() {
  RunLog::Facts facts;
  facts.metric = kind.metric();
  facts.row_unit = data->row_unit();
  facts.rows_per_sample = parallel->model().sample_shape().targets;
  facts.flops_per_sample = parallel->model().train_flops_per_sample();
  facts.ranks = world.size();
  // the peak TFLOP/s per rank MFU is measured against (train.peak_tflops, else a known GPU's; 0: none)
  facts.peak_tflops = cfg.train.peak_tflops > 0 ? cfg.train.peak_tflops : known_peak_tflops(dev->describe(), precision);
  facts.grad_clip = cfg.optim.grad_clip > 0;
  log = std::make_unique<RunLog>(facts);
  saver = std::make_unique<RunSaver>(world, *mesh, *parallel, cfg, run_dir, data->kept_file());
  checkpoints = std::make_unique<Checkpointer>(*saver, world, *log, new_nodes, cfg.train.checkpoint_every,
                                               Checkpointer::Shape{dp, batch_split, epoch_samples, mix_positions()});
  // validation windows per evaluation: train.eval_max_batches global batches (0 = all)
  evaluator = std::make_unique<Evaluator>(*parallel, *valid_set, *test_set, batch_split.micro_batch,
                                          cfg.train.eval_max_batches * batch_split.global(dp), precision, mesh->dp(),
                                          cfg.train.eval_every, valid_parts());
}

std::function<Json(int64_t, int64_t)> TrainingParts::mix_positions() const {
  const auto* mix = dynamic_cast<const MixDataset*>(train_set.get());
  if (mix == nullptr) return {};
  return [this, mix](int64_t epoch, int64_t consumed) {
    std::vector<int64_t> order;  // the epoch's global order: its first `consumed` samples are done
    if (cfg.data.shuffle) DistributedSampler::permutation(mix->size(), cfg.train.seed, epoch, order);
    const std::vector<int64_t> drawn = mix->drawn_through(epoch, consumed, order);
    Json sources = Json::array();
    for (size_t s = 0; s < drawn.size(); ++s)
      sources.push_back({{"dir", cfg.data.mix[s].dir}, {"weight", cfg.data.mix[s].weight}, {"drawn", drawn[s]}});
    return sources;
  };
}

std::vector<Evaluator::Part> TrainingParts::valid_parts() const {
  std::vector<Evaluator::Part> parts;
  const std::vector<std::string> names = data->part_names();
  for (size_t i = 0; i < valid_by_source.size(); ++i) parts.push_back({names[i], valid_by_source[i].get()});
  return parts;
}

RunParts TrainingParts::report_parts() {
  return {cfg, kind, *data, *train_set, world, *mesh, *parallel, *dev, precision, dp, batch_split};
}

// The model fitted to the data (a language model's vocabulary), the config checked, the splits as
// datasets of the model's samples.
void TrainingParts::open_data() {
  if (root && logs_at(LogLevel::info) && !data->note().empty()) std::printf("%s\n", data->note().c_str());
  kind.fit_to_data(cfg.model, data->facts(), data->dir());
  same_on_every_rank([&] {
    cfg.validate();
    kind.validate(cfg.model, true);
  });
  precision = cfg.train.compute_precision();
  const SampleShape sample = kind.sample_shape(cfg.model);
  train_set = data->split("train", sample, {cfg.data.stride, cfg.data.document_boundaries});
  valid_set = data->split("valid", sample, {cfg.data.eval_stride, cfg.data.document_boundaries});
  test_set = data->split("test", sample, {cfg.data.eval_stride, cfg.data.document_boundaries});
  valid_by_source = data->split_parts("valid", sample, {cfg.data.eval_stride, cfg.data.document_boundaries});
}

// The mesh parallel.* asks for (the same error on every rank), and this rank's data-parallel place.
MeshShape TrainingParts::mesh_shape_of_config() {
  std::string fallback;  // an elastic job's shape when the world no longer fits parallel.*
  const MeshShape shape = same_on_every_rank([&] { return mesh_shape(fallback); });
  if (root && !fallback.empty()) std::printf("%s\n", fallback.c_str());
  dp = shape.dp();
  dp_rank = mesh_coord(shape, world.rank()).dp_index(shape);
  const TrainConfig& t = cfg.train;
  batch_split = same_on_every_rank([&] { return run_batch_split(t.global_batch, t.batch_size, t.grad_accum, dp); });
  const DistEnv& env = world.env();
  if (env.elastic)
    same_on_every_rank([&] {
      require_copies_at_every_size(env.elastic_min, env.elastic_max, env.local_world_size, int(shape.tp),
                                   int(shape.pp), int(shape.cp));
    });
  if (env.elastic && t.global_batch > 0)
    same_on_every_rank([&] {
      require_split_at_every_size(t.global_batch, env.elastic_min, env.elastic_max, env.local_world_size,
                                  shape.tp * shape.cp * shape.pp);
    });
  if (root && logs_at(LogLevel::info) && t.global_batch > 0) std::printf("%s\n", batch_split.describe(dp).c_str());
  epoch_samples = train_set->size();
  rank_samples = train_sampler().size();
  return shape;
}

// Resumes (after `--resume`, or when dtrun restarted the workers) or starts from train.init_from's
// weights. `resume` comes back true when a checkpoint was loaded; returns whether it is one of this
// run dir's (its logs then continue).
bool TrainingParts::start_from(bool& resume, const std::string& from) {
  const bool restarted = world.env().restart_count > 0;
  const ResumePlan plan = plan_resume(run_dir, resume, restarted, from);
  if ((resume || restarted) && plan.candidates.empty() && root && logs_at(LogLevel::info))
    std::printf("run dir %s has no checkpoint yet (its run stopped before the first one): starting it afresh\n",
                run_dir.c_str());
  if (resume || restarted) {
    const std::string ck = load_newest_good(plan, run_dir, world.all(), [&](const std::string& c) {
      RankState held(parallel->model(), parallel->fsdp(), &parallel->optimizer(), parallel->tp_slice());
      load_report = load_checkpoint(c, cfg.model, held, &parallel->optimizer(), &state);
    });
    resume = !ck.empty();
    if (!resume) return true;
    require_same_data(ck, *data, "resume from");
    const LoaderPlace place = place_loader(state, batch_split.micro_batch, dp, epoch_samples, batch_split.accum);
    // The epoch's loss so far is a sum of loader-batch means: at another split of the same samples
    // it is as many means of the new batches (the epoch line is their mean).
    if (state.batch_in_epoch > 0 && place.batch_in_epoch != state.batch_in_epoch)
      state.epoch_loss_sum *= double(place.batch_in_epoch) / double(state.batch_in_epoch);
    state.batch_in_epoch = place.batch_in_epoch;
    if (root) {
      if (logs_at(LogLevel::info))
        std::printf("resumed from %s (step %lld, epoch %lld)%s\n", ck.c_str(), (long long)state.global_step,
                    (long long)state.epoch + 1, ck != plan.candidates.front() ? ": the newest good checkpoint" : "");
      if (!place.note.empty()) std::printf("%s\n", place.note.c_str());
      std::fflush(stdout);
    }
    const bool same_run = in_run_dir(ck, run_dir);
    if (same_run) checkpoints->resumed_at(state.global_step);
    return same_run;
  }
  if (!cfg.train.init_from.empty()) {
    RankState held(parallel->model(), parallel->fsdp(), nullptr, parallel->tp_slice());
    load_checkpoint(cfg.train.init_from, cfg.model, held, nullptr, nullptr);
    require_same_data(cfg.train.init_from, *data, "start from");
    if (root) std::printf("initial weights from %s\n", cfg.train.init_from.c_str());
  }
  return true;
}

// Rank 0: the run dir's config and logs. continues: the logs go on where this run dir's
// checkpoint left them (a fresh start, or a checkpoint of another run, clears them).
void TrainingParts::open_run_dir(bool continues, bool resumed) {
  // The run dir keeps one line of history: what a resumed or restarted run leaves behind it
  // (later checkpoints, a later model_best or model_final) is moved aside before anything is written.
  const int64_t goes_on_from = continues ? state.global_step : 0;
  const SetAside aside = set_aside_after(run_dir, goes_on_from);
  if (!aside.folder.empty()) {
    std::printf("run dir %s goes on from step %lld: what came after it (%s) moved to %s\n", run_dir.c_str(),
                (long long)goes_on_from, aside.describe().c_str(), aside.folder.c_str());
    std::fflush(stdout);
  }
  write_file_atomic(run_dir + "/config.json", cfg.to_json().dump(2));
  const std::string events = rewind_logs(run_dir, continues ? state.logs : LogMarks{});
  log->open(run_dir, events);
  if (resumed) log->checkpoint_load(state.global_step, load_report.seconds, load_report.bytes_read);
  if (const auto change = membership_record(world, state.global_step)) log->write(*change);
}

// The model and its optimizer, planned for the per-rank batch: the one place memory for the run is
// taken, so a batch that cannot fit is named here, before any step.
void TrainingParts::build_model() {
  // A pipeline deals any number of rows into its micro-batches (a batch of fewer rows than
  // micro-batches runs a shorter schedule), so a micro-batch split from train.global_batch needs
  // nothing more of it.
  const int64_t B = batch_split.micro_batch;
  // every batch, the epoch's short last one, a filler
  const ParallelPlan plan = parallel_plan_of(cfg, precision, batch_split.accum, {B, rank_samples % B, 1});
  auto too_big = [&](const std::string& why) {
    const std::string what = cfg.train.global_batch > 0
                                 ? "train.global_batch's micro-batch of " + std::to_string(B) + " samples per rank"
                                 : "train.batch_size = " + std::to_string(B);
    return ModelDoesNotFit(what + " does not fit in " +
                               (dev->kind() == DeviceKind::cpu ? "this machine's memory" : dev->describe() + "'s memory") +
                               " (" + why + ")" + (dev->kind() == DeviceKind::cpu ? memory_limit_note() : std::string()) +
                               (cfg.train.global_batch > 0
                                    ? ": lower train.batch_size (train.global_batch then takes more micro-steps)"
                                    : ": lower train.batch_size, and raise train.grad_accum to keep the global batch"),
                           dev->describe(), dev->memory_bytes());
  };
  // On the CPU the activations are checked against the memory left before any of it is touched.
  const size_t limit = dev->kind() == DeviceKind::cpu ? size_t(available_host_bytes()) : SIZE_MAX;
  const UnitFactory units = model_units_of(kind, cfg.model, *dev, plan.recompute);
  try {
    parallel = std::make_unique<ParallelModel>(units, B, *dev, *mesh, plan, cfg.optim, cfg.train.seed, limit);
  } catch (const ActivationsDoNotFit& e) {
    char why[96];
    std::snprintf(why, sizeof why, "its activations need %.1f GiB, %.1f GiB is available", double(e.need) / (1 << 30),
                  double(e.have) / (1 << 30));
    throw too_big(why);
  } catch (const std::bad_alloc&) {
    throw too_big("activations for " + std::to_string(B) + " samples");
  } catch (const ResourceExhausted& e) {  // a GPU out of memory while the parts were allocated
    if (dev->kind() == DeviceKind::cpu) throw;
    const std::string why = e.what();
    throw too_big(why.substr(0, why.find(": lower")));
  }
}

// The mesh from parallel.* (parallel.dp is plain DDP's name for dp_replicate); in an elastic job
// (DTRAIN_ELASTIC) sizes the world no longer makes give way in the data-parallel dimensions, and
// `note` names the shape taken.
MeshShape TrainingParts::mesh_shape(std::string& note) const {
  const ParallelConfig& p = cfg.parallel;
  const int pp = int(p.pp), dpr = int(p.dp != 0 ? p.dp : p.dp_replicate), dps = int(p.dp_shard), tp = int(p.tp);
  const int cp = int(p.cp);
  note.clear();
  MeshShape s = world.env().elastic ? MeshShape::fit_elastic(world.size(), pp, dpr, dps, tp, note, cp)
                                    : MeshShape::fit(world.size(), pp, dpr, dps, tp, cp);
  s.set_expert_parallel(int(p.ep));
  return s;
}

// Gradients live where the model does: on GPUs the mesh's groups are NCCL's, on the CPU the world's
// (Gloo's or MPI's: parallel.backend).
World::BackendFactory TrainingParts::backend_factory() {
  const CommBackend chosen = choose_comm_backend(cfg.parallel.backend, dev->kind() != DeviceKind::cpu, world.env());
  require(chosen == CommBackend::nccl || chosen == world.backend() || world.size() == 1,
          std::string("parallel.backend = ") + comm_backend_name(chosen) + ", but the world was made over " +
              comm_backend_name(world.backend()) + ": make the World with the backend of the config");
  if (chosen != CommBackend::nccl) return nullptr;
  const CudaBackendApi& cuda = cuda_backend("NCCL for device = \"" + cfg.train.device + "\"");
  ComputeDevice* d = dev.get();
  return [&cuda, d](Store& state, int rank, int size, Millis timeout, const std::string& name) {
    return cuda.connect_nccl(state, rank, size, d->index(), d->stream(), timeout, name);
  };
}

DistributedSampler TrainingParts::train_sampler() const {
  return DistributedSampler(epoch_samples, cfg.data.shuffle, cfg.train.seed, dp, dp_rank, false, /*pad=*/false);
}

int64_t TrainingParts::global_batches() const {
  const int64_t per = batch_split.micro_batch * dp;
  return (epoch_samples + per - 1) / per;
}

TrainingParts::BatchSamples TrainingParts::samples_of_batches(int64_t first, int64_t count) const {
  const int64_t per = batch_split.micro_batch * dp;
  BatchSamples r;
  for (int64_t b = first; b < first + count; ++b) {
    const int64_t rows = std::min(per, epoch_samples - b * per);  // global batch b's (the last may be short)
    r.samples += rows;
    r.uneven = r.uneven || rows != per;
  }
  return r;
}

}  // namespace dtrain
