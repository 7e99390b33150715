// Trainer (see trainer.hpp): the step loop and everything around it.
#include "train/trainer.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/cuda_backend.hpp"
#include "core/limits.hpp"
#include "core/phase_clock.hpp"
#include "data/loader.hpp"
#include "data/prepare.hpp"
#include "data/sampler.hpp"
#include "data/vocab.hpp"
#include "metrics/jsonl.hpp"
#include "metrics/progress.hpp"
#include "metrics/tensorboard.hpp"
#include "comm/mesh.hpp"
#include "models/registry.hpp"
#include "parallel/plan.hpp"
#include "train/device_setup.hpp"
#include "train/run_report.hpp"
#include "train/run_saver.hpp"
#include "train/elastic.hpp"
#include "train/history.hpp"
#include "train/global_batch.hpp"
#include "train/job_watch.hpp"
#include "train/memory_account.hpp"
#include "train/rank_agreement.hpp"
#include "train/rank_state.hpp"
#include "train/resume.hpp"
#include "train/run_dir.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

struct Trainer::Impl {
  const int64_t start_rss;  // the process's resident memory before the run (MemoryAccount::at_start)
  RunConfig cfg;
  std::string run_dir;
  World& world;
  const bool root;  // rank 0: the one that prints and writes
  const ModelKind& kind;  // of cfg.model
  std::unique_ptr<DataSource> data;  // data.dir, opened for the model's input
  std::unique_ptr<Dataset> train_set, valid_set, test_set;
  std::shared_ptr<ComputeDevice> dev;
  TrainerState st;
  Precision precision = Precision::f32;
  std::unique_ptr<RunDirLock> lock;  // rank 0's, for the run's life
  std::unique_ptr<JsonlWriter> jsonl;
  std::unique_ptr<TensorBoardWriter> tb;
  std::unique_ptr<DeviceMesh> mesh;
  std::unique_ptr<ParallelModel> par;  // the parallel plan applied on the mesh; its parts:
  Model* model = nullptr;
  Optimizer* opt = nullptr;
  DataParallel* ddp = nullptr;                   // dp_shard = 1, dp > 1: replicated parameters
  FullyShardedDataParallel* fsdp = nullptr;      // dp_shard > 1
  TensorParallelRegions* tp_regions = nullptr;   // tp > 1: where the model's slices meet
  int dp = 1, dp_rank = 0;
  // Samples per rank and micro-step, and micro-steps per optimizer step: train.batch_size and
  // train.grad_accum as given, or train.global_batch's split over the dp ranks (cfg keeps the
  // user's values, so config.json lets a resume at another size split again).
  BatchSplit batch_split;
  double device_seconds = 0.0;  // step time on the device's clock
  double loss_read = 0.0, loss_divisor = 0.0;  // see train_step
  std::unique_ptr<RunSaver> saver;
  int64_t last_checkpoint_step = -1;  // the step of this run dir's newest checkpoint written by this run
  LoadReport load_report;              // of the checkpoint resumed from
  int64_t rank_samples = 0;            // training samples of this data-parallel rank per epoch (unpadded)
  int64_t epoch_samples = 0;           // training samples per epoch, all ranks
  std::unique_ptr<JobWatch> watch;     // phases, the trace
  NewNodesWatch new_nodes{world};      // an elastic job's nodes waiting to join
  struct StepFigures {                 // the last step's, for its train record
    double loss = 0.0, norm = 0.0;
    float lr = 0.0f;
  } last;
  int64_t log_rows = 0;        // rows of the loss (global) since the last train record
  double log_seconds = 0.0;    // and the steps' time

  Impl(RunConfig c, std::string dir, bool resume, const std::string& from, World& w)
      : start_rss(resident_bytes()),
        cfg(std::move(c)),
        run_dir(std::move(dir)),
        world(w),
        root(w.rank() == 0),
        kind(kind_of(cfg.model)),
        data(same_on_every_rank([&] { return DataSource::open(cfg.data.dir, kind.sample_shape(cfg.model).input); })) {
    open_data();
    require_same_run_on_every_rank(world, cfg.to_json(), data->fingerprint());
    if (root) lock = std::make_unique<RunDirLock>(run_dir);  // one writer, before anything reads the run dir
    dev = open_device(cfg.train, world);
    watch = std::make_unique<JobWatch>(cfg.train, world, *dev, run_dir);
    mesh = std::make_unique<DeviceMesh>(world, mesh_shape_of_config(), backend_factory());
    build_model();
    saver = std::make_unique<RunSaver>(world, *mesh, *par, cfg, run_dir, data->kept_file());
    const bool same_run = start_from(resume, from);
    par->broadcast_parameters();  // DDP: every replica starts from data-parallel rank 0's weights
    world.all().barrier();  // every rank has checked the run dir before rank 0 writes into it
    if (root) open_run_dir(resume && same_run, resume);
  }

  // The model fitted to the data (a language model's vocabulary), the config checked, the splits as
  // datasets of the model's samples.
  void open_data() {
    if (root && !data->note().empty()) std::printf("%s\n", data->note().c_str());
    kind.fit_to_data(cfg.model, data->facts(), data->dir());
    same_on_every_rank([&] {
      cfg.validate();
      kind.validate(cfg.model, true);
    });
    precision = cfg.train.precision == "bf16" ? Precision::bf16 : Precision::f32;
    const SampleShape sample = kind.sample_shape(cfg.model);
    train_set = data->split("train", sample, cfg.data.stride);
    valid_set = data->split("valid", sample, cfg.data.eval_stride);
    test_set = data->split("test", sample, cfg.data.eval_stride);
  }

  // The mesh parallel.* asks for (the same error on every rank), and this rank's data-parallel place.
  MeshShape mesh_shape_of_config() {
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
                                     int(shape.pp));
      });
    if (env.elastic && t.global_batch > 0)
      same_on_every_rank([&] {
        require_split_at_every_size(t.global_batch, env.elastic_min, env.elastic_max, env.local_world_size,
                                    shape.tp * shape.pp);
      });
    if (root && t.global_batch > 0) std::printf("%s\n", batch_split.describe(dp).c_str());
    epoch_samples = train_set->size();
    rank_samples = train_sampler().size();
    return shape;
  }

  // Resumes (after `--resume`, or when dtrun restarted the workers) or starts from train.init_from's
  // weights. `resume` comes back true when a checkpoint was loaded; returns whether it is one of this
  // run dir's (its logs then continue).
  bool start_from(bool& resume, const std::string& from) {
    const bool restarted = world.env().restart_count > 0;
    const ResumePlan plan = plan_resume(run_dir, resume, restarted, from);
    if ((resume || restarted) && plan.candidates.empty() && root)
      std::printf("run dir %s has no checkpoint yet (its run stopped before the first one): starting it afresh\n",
                  run_dir.c_str());
    if (resume || restarted) {
      const std::string ck = load_newest_good(plan, run_dir, world.all(), [&](const std::string& c) {
        RankState held(*model, fsdp, opt, par->tp_slice());
        load_report = load_checkpoint(c, cfg.model, held, opt, &st);
      });
      resume = !ck.empty();
      if (!resume) return true;
      require_same_data(ck, *data, "resume from");
      const LoaderPlace place = place_loader(st, batch_split.micro_batch, dp, epoch_samples, batch_split.accum);
      // The epoch's loss so far is a sum of loader-batch means: at another split of the same samples
      // it is as many means of the new batches (the epoch line is their mean).
      if (st.batch_in_epoch > 0 && place.batch_in_epoch != st.batch_in_epoch)
        st.epoch_loss_sum *= double(place.batch_in_epoch) / double(st.batch_in_epoch);
      st.batch_in_epoch = place.batch_in_epoch;
      if (root) {
        std::printf("resumed from %s (step %lld, epoch %lld)%s\n", ck.c_str(), (long long)st.global_step,
                    (long long)st.epoch + 1, ck != plan.candidates.front() ? ": the newest good checkpoint" : "");
        if (!place.note.empty()) std::printf("%s\n", place.note.c_str());
        std::fflush(stdout);
      }
      const bool same_run = in_run_dir(ck, run_dir);
      if (same_run) last_checkpoint_step = st.global_step;
      return same_run;
    }
    if (!cfg.train.init_from.empty()) {
      RankState held(*model, fsdp, nullptr, par->tp_slice());
      load_checkpoint(cfg.train.init_from, cfg.model, held, nullptr, nullptr);
      require_same_data(cfg.train.init_from, *data, "start from");
      if (root) std::printf("initial weights from %s\n", cfg.train.init_from.c_str());
    }
    return true;
  }

  // Rank 0: the run dir's config and logs. continues: the logs go on where this run dir's
  // checkpoint left them (a fresh start, or a checkpoint of another run, clears them).
  void open_run_dir(bool continues, bool resumed) {
    // The run dir keeps one line of history: what a resumed or restarted run leaves behind it
    // (later checkpoints, a later model_best or model_final) is moved aside before anything is written.
    const int64_t goes_on_from = continues ? st.global_step : 0;
    const SetAside aside = set_aside_after(run_dir, goes_on_from);
    if (!aside.folder.empty()) {
      std::printf("run dir %s goes on from step %lld: what came after it (%s) moved to %s\n", run_dir.c_str(),
                  (long long)goes_on_from, aside.describe().c_str(), aside.folder.c_str());
      std::fflush(stdout);
    }
    write_file_atomic(run_dir + "/config.json", cfg.to_json().dump(2));
    const std::string events = rewind_logs(run_dir, continues ? st.logs : LogMarks{});
    jsonl = std::make_unique<JsonlWriter>(run_dir + "/metrics.jsonl");
    if (resumed) {
      Json j = Json::object();
      j["type"] = "checkpoint_load";
      j["step"] = st.global_step;
      j["seconds"] = load_report.seconds;
      j["bytes_read"] = load_report.bytes_read;  // by rank 0
      jsonl->write(j);
    }
    if (const auto change = membership_record(world, st.global_step)) jsonl->write(*change);
    tb = std::make_unique<TensorBoardWriter>(run_dir, events);
  }

  // The model and its optimizer, planned for the per-rank batch: the one place memory for the run is
  // taken, so a batch that cannot fit is named here, before any step.
  void build_model() {
    // A pipeline deals any number of rows into its micro-batches (a batch of fewer rows than
    // micro-batches runs a shorter schedule), so a micro-batch split from train.global_batch needs
    // nothing more of it.
    const int64_t B = batch_split.micro_batch;
    ParallelPlan plan;
    plan.tp_sequence = cfg.parallel.tp_sequence;
    plan.tp_overlap = cfg.parallel.tp_overlap;
    plan.tp_overlap_chunks = int(cfg.parallel.tp_overlap_chunks);
    const std::string& keep = cfg.train.recompute;
    plan.recompute = keep == "full" ? Recompute::full : keep == "selective" ? Recompute::selective : Recompute::none;
    plan.fsdp.prefetch = int(cfg.parallel.fsdp_prefetch);
    plan.fsdp.reshard_after_forward = cfg.parallel.fsdp_reshard_after_forward;
    plan.fsdp.accumulate = batch_split.accum > 1;
    plan.fsdp.gather_bf16 = precision == Precision::bf16;  // master shards and optimizer state stay f32
    plan.fsdp.reduce_bf16 = cfg.parallel.fsdp_reduce_dtype == "bf16";
    plan.ddp_bucket_bytes = size_t(cfg.parallel.bucket_mb * (1 << 20));
    plan.pp.schedule = cfg.parallel.pp_schedule;
    plan.pp.schedule_file = cfg.parallel.pp_schedule_file;
    plan.pp.virtual_stages = int(cfg.parallel.pp_virtual);
    plan.pp.microbatches = int(cfg.parallel.microbatches);
    plan.pp.split = cfg.pp_split_units();
    plan.pp.unit_costs = cfg.pp_unit_cost_list();
    plan.pp.batch_rows = {B, rank_samples % B, 1};  // every batch, the epoch's short last one, a filler
    auto too_big = [&](const std::string& why) {
      const std::string what = cfg.train.global_batch > 0
                                   ? "train.global_batch's micro-batch of " + std::to_string(B) + " samples per rank"
                                   : "train.batch_size = " + std::to_string(B);
      return Error(what + " does not fit in " +
                   (dev->kind() == DeviceKind::cpu ? "this machine's memory" : dev->describe() + "'s memory") + " (" +
                   why + ")" + (dev->kind() == DeviceKind::cpu ? memory_limit_note() : std::string()) +
                   (cfg.train.global_batch > 0
                        ? ": lower train.batch_size (train.global_batch then takes more micro-steps)"
                        : ": lower train.batch_size, and raise train.grad_accum to keep the global batch"));
    };
    // On the CPU the activations are checked against the memory left before any of it is touched.
    const size_t limit = dev->kind() == DeviceKind::cpu ? size_t(available_host_bytes()) : SIZE_MAX;
    const UnitFactory units = [&](TpSlice slice, TpRegions& regions) {
      UnitList u = kind.units(cfg.model, *dev, slice, regions);
      if (plan.recompute == Recompute::selective && !u.recomputes_selectively())
        throw ConfigError("train.recompute = selective: model.kind = " + kind.name() +
                          " has no attention or activation it could recompute selectively: use "
                          "train.recompute = full (each hidden unit's forward again in its backward) or none");
      return u;
    };
    try {
      par = std::make_unique<ParallelModel>(units, B, *dev, *mesh, plan, cfg.optim, cfg.train.seed, limit);
    } catch (const ActivationsDoNotFit& e) {
      char why[96];
      std::snprintf(why, sizeof why, "its activations need %.1f GiB, %.1f GiB is available",
                    double(e.need) / (1 << 30), double(e.have) / (1 << 30));
      throw too_big(why);
    } catch (const std::bad_alloc&) {
      throw too_big("activations for " + std::to_string(B) + " samples");
    }
    model = &par->model();
    opt = &par->optimizer();
    ddp = par->ddp();
    fsdp = par->fsdp();
    tp_regions = par->tp_regions();
  }

  // The mesh from parallel.* (parallel.dp is plain DDP's name for dp_replicate); in an elastic job
  // (DTRAIN_ELASTIC) sizes the world no longer makes give way in the data-parallel dimensions, and
  // `note` names the shape taken.
  MeshShape mesh_shape(std::string& note) const {
    const ParallelConfig& p = cfg.parallel;
    const int pp = int(p.pp), dpr = int(p.dp != 0 ? p.dp : p.dp_replicate), dps = int(p.dp_shard), tp = int(p.tp);
    note.clear();
    if (world.env().elastic) return MeshShape::fit_elastic(world.size(), pp, dpr, dps, tp, note);
    return MeshShape::fit(world.size(), pp, dpr, dps, tp);
  }

  // Gradients live where the model does: on GPUs the mesh's groups are NCCL's, on the CPU the world's
  // (Gloo's or MPI's: parallel.backend).
  World::BackendFactory backend_factory() {
    const CommBackend chosen = choose_comm_backend(cfg.parallel.backend, dev->kind() != DeviceKind::cpu, world.env());
    require(chosen == CommBackend::nccl || chosen == world.backend() || world.size() == 1,
            std::string("parallel.backend = ") + comm_backend_name(chosen) + ", but the world was made over " +
                comm_backend_name(world.backend()) + ": make the World with the backend of the config");
    if (chosen != CommBackend::nccl) return nullptr;
    const CudaBackendApi& cuda = cuda_backend("NCCL for device = \"" + cfg.train.device + "\"");
    ComputeDevice* d = dev.get();
    return [&cuda, d](Store& st, int rank, int size, Millis timeout, const std::string& name) {
      return cuda.connect_nccl(st, rank, size, d->index(), d->stream(), timeout, name);
    };
  }

  // Mean over the data-parallel ranks of per-rank values (every rank calls it at the same point).
  void average(double* v, size_t n) {
    if (dp > 1) world.all().allreduce(v, n, ReduceOp::avg);
  }

  // A resume checkpoint of the current step under RUN/checkpoints (RunSaver), logged. Every rank
  // takes part. In an elastic job with nodes waiting to join, every rank then stops
  // (StopForNewNodes) unless the run ends here anyway (last).
  void checkpoint(bool last = false) {
    PhaseScope phase(Phase::checkpoint);
    // The epoch's loss so far is saved averaged over the ranks: a resumed run, at any size, then
    // prints the epoch loss the uninterrupted run would have.
    TrainerState saved = st;
    average(&saved.epoch_loss_sum, 1);
    saved.data_parallel = dp;
    saved.global_batch = batch_split.global(dp);
    saved.samples_in_epoch = std::min(st.batch_in_epoch * batch_split.micro_batch * dp, epoch_samples);
    if (root) saved.logs = {jsonl->bytes(), fs::path(tb->path()).filename().string(), tb->bytes()};
    finish_async_save();  // one save at a time; the one in flight is logged as it lands
    const RunSaver::Checkpoint c = saver->checkpoint(saved);
    last_checkpoint_step = st.global_step;
    if (root) {
      Json j = Json::object();
      j["type"] = "checkpoint";
      j["step"] = st.global_step;
      j["format"] = c.sharded ? "sharded" : "full";
      j["async"] = c.async;
      j["bytes"] = c.report.bytes;  // the whole checkpoint, every rank's share
      j["stall_seconds"] = c.report.stall_seconds;
      jsonl->write(j);
    }
    stop_if_nodes_wait(last);
  }

  // After a checkpoint: dtrun restarts the job with the nodes that wait to join.
  void stop_if_nodes_wait(bool last) {
    if (last || !new_nodes.asked()) return;
    finish_async_save();  // the checkpoint the job goes on from is whole on disk
    throw StopForNewNodes(st.global_step);
  }

  // Waits for the background save in flight (if any) and logs how long its writing took.
  void finish_async_save() {
    const auto [step, seconds] = saver->finish_background();
    if (step < 0 || !root) return;
    Json j = Json::object();
    j["type"] = "checkpoint_written";
    j["step"] = step;
    j["write_seconds"] = seconds;
    jsonl->write(j);
  }

  // What the run is made of, for its report.
  RunParts parts() const {
    return {cfg, kind, *data, *train_set, world, *mesh, *par, *dev, precision, dp, batch_split};
  }

  // epoch: the epoch the evaluation belongs to (1-based); the final test: the epoch of the last step
  // (a language model's record carries its perplexity as "ppl", a classifier's its "accuracy")
  void log_eval(const char* split, const EvalResult& r, int64_t epoch) {
    if (!root) return;
    Json j = Json::object();
    j["type"] = split;
    j["step"] = st.global_step;
    j["epoch"] = epoch;
    j["loss"] = r.loss;
    j[kind.metric() == Metric::perplexity ? "ppl" : "accuracy"] = metric_value(kind.metric(), r);
    jsonl->write(j);
  }

  // Validation windows per evaluation: train.eval_max_batches global batches (0 = all).
  int64_t eval_windows() const {
    return cfg.train.eval_max_batches * batch_split.global(dp);
  }

  // One evaluation pass of this rank's model (a pipeline's: through every stage).
  PassLoss eval_pass() {
    return [this](const BatchView& batch, const StepContext& ctx) { return par->eval_sums(batch, ctx); };
  }

  // The training samples' order: the epoch's seeded permutation dealt out to the data-parallel ranks
  // in turn (rank r takes positions r, r + dp, …), unpadded: each sample once per epoch at any size.
  DistributedSampler train_sampler() const {
    return DistributedSampler(epoch_samples, cfg.data.shuffle, cfg.train.seed, dp, dp_rank, false, /*pad=*/false);
  }

  // Loader batches per epoch, alike on every rank: global batch b holds the permutation's positions
  // [b·B·dp, (b+1)·B·dp), so the epoch's last may be short, and some ranks then hold no sample of it.
  int64_t global_batches() const {
    const int64_t per = batch_split.micro_batch * dp;
    return (epoch_samples + per - 1) / per;
  }

  // Samples of global batch b of the epoch, all ranks (the last one may be short).
  int64_t global_rows_of(int64_t b) const {
    const int64_t per = batch_split.micro_batch * dp;
    return std::min(per, epoch_samples - b * per);
  }

  // One optimizer step's forward and backward over `micro` loader batches, queued on the device.
  // Each rank weighs its rows by the step's global count (dp / rows of the whole step: the data-
  // parallel mean then makes it the one-process mean, also when an epoch's last step leaves the
  // ranks unequal shares or none; a filler batch weighs nothing). The step's loss, micro × the mean
  // over its rows (the sum of its micro-batches' means when they are equal), is read by step_loss()
  // after the optimizer step (no wait inside the step), unless the micro-batches differ in size (an
  // epoch's last step: then read per micro-batch, the filler's left out). rows_done: the step's
  // samples, all ranks.
  void train_step(BatchLoader& loader, int64_t micro, Batch& batch, int64_t& rows_done) {
    const int64_t T = model->sample_shape().targets;  // rows of the loss per sample
    int64_t step_rows = 0;
    bool uneven = false;
    for (int64_t m = 0; m < micro; ++m) {
      const int64_t rows = global_rows_of(st.batch_in_epoch + m);
      step_rows += rows;
      uneven = uneven || rows != batch_split.micro_batch * dp;
    }
    rows_done = step_rows;
    par->zero_grad();
    loss_read = 0.0;
    int64_t own_rows = 0;  // this rank's samples before the micro-batch
    for (int64_t m = 0; m < micro; ++m) {
      {
        PhaseScope waiting(Phase::data);
        require(loader.next(batch), "internal: the loader ran out of batches mid-step");
      }
      StepContext ctx;
      ctx.B = batch.samples;
      ctx.T = T;
      ctx.training = true;
      ctx.dropout = kind.dropout(cfg.model);
      ctx.seed = cfg.train.seed;
      ctx.step = uint32_t(st.global_step);
      // Row j of rank r's micro-batch m is sample r + dp·(rows before it on this rank) of the
      // step's global batch: the same keys as one rank running the whole batch.
      ctx.sample_offset = dp_rank + int64_t(dp) * own_rows;
      ctx.sample_stride = dp;
      ctx.loss_scale = batch.filler ? 0.0f : float(dp) / float(step_rows * T);
      ctx.precision = precision;
      par->forward_backward(batch.view(), ctx, m == micro - 1);
      if (uneven) {  // this rank's share of the step's mean (the data-parallel mean adds the shares up)
        const double sum = par->take_loss();
        if (!batch.filler) loss_read += sum * double(dp * micro) / double(step_rows * T);
      }
      if (!batch.filler) own_rows += batch.samples;
    }
    {
      PhaseScope phase(Phase::backward);  // the gradients' last reductions (their waits: comm)
      par->finish_gradients();
    }
    loss_divisor = uneven ? 0.0 : double(batch_split.micro_batch * T);  // each micro-batch's rows on this rank
  }

  double step_loss() {
    const double loss = loss_divisor > 0 ? loss_read + par->take_loss() / loss_divisor : loss_read;
    require(std::isfinite(loss), "training diverged at step " + std::to_string(st.global_step) +
                                     " (loss is not finite): lower train.lr or set optim.grad_clip");
    return loss;
  }

  // How many optimizer steps the run takes: per epoch, in all, and the epochs they span.
  struct StepPlan {
    int64_t batches = 0;    // loader batches per rank and epoch
    int64_t per_epoch = 0;  // optimizer steps per epoch
    int64_t total = 0;      // optimizer steps in all (train.epochs, cut by train.max_steps)
    int64_t epochs = 0;
  };
  StepPlan plan_steps(const BatchLoader& loader) const {
    const int64_t E = cfg.train.epochs, A = batch_split.accum;
    StepPlan p;
    p.batches = loader.num_batches();
    p.per_epoch = (p.batches + A - 1) / A;
    p.total = E > 0 ? E * p.per_epoch : cfg.train.max_steps;
    if (cfg.train.max_steps > 0) p.total = std::min(p.total, cfg.train.max_steps);
    p.epochs = E > 0 ? E : (p.total + p.per_epoch - 1) / p.per_epoch;
    return p;
  }

  void run() {
    const int threads = omp_get_max_threads();  // as configure_threads set them
    // Room beside the planned memory for the threads' stacks (OpenMP's, the loader's, the process
    // group's, a background save's) and what oneDNN maps: below it a library fails uncatchably.
    require_address_space(int64_t(threads + 3) * thread_stack_bytes(),
                          "this rank's " + std::to_string(threads + 3) + " threads (" +
                              std::to_string(thread_stack_bytes() >> 20) + " MiB of stack each) and oneDNN's kernels",
                          "lower train.batch_size (and raise train.grad_accum) or train.threads");
    DistributedSampler sampler = train_sampler();
    BatchLoader loader(*train_set, sampler, batch_split.micro_batch, false, true, global_batches());
    const StepPlan plan = plan_steps(loader);
    if (root) print_setup(parts(), plan.per_epoch, threads);
    if (parts().dev.kind() == DeviceKind::cpu) {  // collective
      const std::string line = describe_threads(world);
      if (root) std::printf("%s\n", line.c_str());
    }
    if (dp > 1) {
      const std::string where = world.layout();
      if (root) std::printf("workers: %s\n", where.c_str());
    }
    ProgressLine progress(root && cfg.train.progress);
    watch->start(st.global_step);
    Batch batch;
    bool stop = st.global_step >= plan.total;
    while (!stop && st.epoch < plan.epochs) stop = run_epoch(plan, sampler, loader, batch, progress);
    finish(threads);
  }

  // What the run is: the model, the data, the batch, the threads or device, each strategy's share.

  // The rest of the current epoch (from where a resumed run stands), then its end: the epoch line,
  // validation, model_best, a checkpoint. Returns whether the run is over.
  bool run_epoch(const StepPlan& plan, DistributedSampler& sampler, BatchLoader& loader, Batch& batch,
                 ProgressLine& progress) {
    const int64_t A = batch_split.accum;
    sampler.set_epoch(st.epoch);
    loader.start_epoch();
    for (int64_t skip = 0; skip < st.batch_in_epoch; ++skip) loader.next(batch);
    const int64_t steps_done = (st.batch_in_epoch + A - 1) / A;
    // what this epoch will run: the whole epoch, or up to train.max_steps
    const int64_t epoch_end = std::min(plan.per_epoch, steps_done + (plan.total - st.global_step));
    EpochClock clock;
    char prefix[64];
    std::snprintf(prefix, sizeof prefix, "[%lld/%lld]", (long long)st.epoch + 1, (long long)plan.epochs);
    while (st.global_step < plan.total && st.batch_in_epoch < plan.batches) {
      step(plan, loader, batch, clock);
      // The step's time ends here; the validation and checkpoint after it count in the next step's.
      watch->end_step(st.global_step);
      if (st.global_step % cfg.train.log_every == 0) log_step();  // before a checkpoint holds the log's length
      progress.update(prefix, (st.batch_in_epoch + A - 1) / A, epoch_end, st.epoch_loss_sum / double(st.batch_in_epoch),
                      clock.rows_per_second());
      if (cfg.train.eval_every > 0 && st.global_step % cfg.train.eval_every == 0) {
        PhaseScope phase(Phase::eval);
        log_eval("val", validate(), st.epoch + 1);
      }
      // A step that ends the epoch's loop is saved by the epoch end (once, with the epoch closed).
      const bool loop_ends = st.global_step >= plan.total || st.batch_in_epoch >= plan.batches;
      if (cfg.train.checkpoint_every > 0 && st.global_step % cfg.train.checkpoint_every == 0 && !loop_ends) checkpoint();
    }
    progress.clear();
    if (st.batch_in_epoch == 0) return true;
    end_epoch(plan, clock);
    return st.global_step >= plan.total;
  }

  // An epoch's training time and rows (tokens), for its throughput.
  struct EpochClock {
    Clock::time_point start = Clock::now();
    int64_t rows = 0;
    double step_seconds = 0.0;
    double rows_per_second() const { return step_seconds > 0 ? double(rows) / step_seconds : 0.0; }
  };

  // One optimizer step: forward and backward over grad_accum micro-batches, clipping, the update, the
  // step's loss, its metrics.jsonl point.
  void step(const StepPlan& plan, BatchLoader& loader, Batch& batch, EpochClock& clock) {
    const auto t0 = Clock::now();
    dev->timer_start();
    const int64_t micro = std::min(batch_split.accum, plan.batches - st.batch_in_epoch);
    int64_t rows = 0;
    train_step(loader, micro, batch, rows);
    double norm = 0.0;
    float lr = 0.0f;
    {
      PhaseScope phase(Phase::optimizer);
      if (cfg.optim.grad_clip > 0) {
        norm = par->grad_norm();
        if (norm > cfg.optim.grad_clip) opt->scale_grads(float(cfg.optim.grad_clip / (norm + 1e-6)));
      }
      lr = opt->lr_at(st.global_step, plan.total);
      opt->step(lr);
    }
    const double loss_sum = step_loss();
    device_seconds += dev->timer_seconds();
    const double dt = seconds_since(t0);
    const int64_t step_rows = rows * model->sample_shape().targets;  // every rank's
    ++st.global_step;
    st.batch_in_epoch += micro;
    st.epoch_loss_sum += loss_sum;
    st.train_seconds += dt;
    st.train_tokens += step_rows;
    clock.rows += step_rows;
    clock.step_seconds += dt;
    log_rows += step_rows;
    log_seconds += dt;
    last = {loss_sum / double(micro), norm, lr};
  }

  // The peak TFLOP/s per rank MFU is measured against (train.peak_tflops, else a known GPU's; 0: none).
  double peak_tflops() const {
    if (cfg.train.peak_tflops > 0) return cfg.train.peak_tflops;
    return known_peak_tflops(dev->describe(), precision);
  }

  // What rows_per_second of the loss (every rank's) compute, into j: tflops_per_rank, and mfu (null
  // without a known peak). Returns the TFLOP/s per rank.
  double add_compute_rate(Json& j, double rows_per_second) const {
    const double tflops = model->train_flops_per_sample() / double(model->sample_shape().targets) * rows_per_second /
                          double(world.size()) / 1e12;
    const double peak = peak_tflops();
    j["tflops_per_rank"] = tflops;
    j["mfu"] = peak > 0 ? Json(tflops / peak) : Json(nullptr);
    return tflops;
  }

  // The last step's train record (every rank takes part: the loss is averaged, the phases gathered).
  void log_step() {
    double loss = last.loss;
    average(&loss, 1);
    Json j = Json::object();
    const PhaseSeconds phases = watch->fill_train_record(j);
    watch->write_resources(jsonl.get(), tb.get());
    // over the steps since the previous record (their own time: validation and checkpoints left out)
    const double rows_per_second = log_seconds > 0 ? double(log_rows) / log_seconds : 0.0;
    log_rows = 0;
    log_seconds = 0.0;
    if (!root) return;
    j["type"] = "train";
    j["step"] = st.global_step;
    j["epoch"] = st.epoch + 1;
    j["loss"] = loss;
    j["lr"] = last.lr;
    j["tokens_per_s"] = rows_per_second;
    j["samples_per_s"] = rows_per_second / double(model->sample_shape().targets);
    const double tflops = add_compute_rate(j, rows_per_second);
    if (cfg.optim.grad_clip > 0) j["grad_norm"] = last.norm;
    jsonl->write(j);
    const int64_t s = st.global_step;
    tb->add_scalar("Loss/train_step", float(loss), s);
    tb->add_scalar("Train/lr", last.lr, s);
    if (cfg.optim.grad_clip > 0) tb->add_scalar("Train/grad_norm", float(last.norm), s);
    const bool tokens = data->row_unit() == "tokens";
    tb->add_scalar(tokens ? "Throughput/tokens_per_s" : "Throughput/samples_per_s",
                   float(tokens ? rows_per_second : j["samples_per_s"].get<double>()), s);
    tb->add_scalar("Throughput/tflops_per_rank", float(tflops), s);
    if (!j["mfu"].is_null()) tb->add_scalar("Throughput/mfu", j["mfu"].get<float>(), s);
    for (int i = 0; i < kPhases; ++i)
      tb->add_scalar(std::string("Phases/") + phase_name(Phase(i)) + "_ms", float(1e3 * phases[size_t(i)]), s);
    tb->add_scalar("Memory/peak_rss_mb", float(peak_rss_mb()), s);
  }

  // The validation loss (train.eval_max_batches global batches of the split; 0: all of it).
  EvalResult validate() {
    return evaluate(eval_pass(), par->eval_in_lockstep(), *valid_set, batch_split.micro_batch, eval_windows(),
                    precision, &mesh->dp());
  }

  // The course's epoch line (mean of batch means, averaged over ranks, and the validation loss), its
  // metrics, model_best when validation improved, and a checkpoint (the epoch closed when done).
  void end_epoch(const StepPlan& plan, const EpochClock& clock) {
    const bool epoch_done = st.batch_in_epoch >= plan.batches;
    double train_loss = st.epoch_loss_sum / double(st.batch_in_epoch);
    average(&train_loss, 1);
    const EvalResult valid = [&] {
      PhaseScope phase(Phase::eval);
      return validate();
    }();
    const double val = valid.loss;
    if (root) {
      // a classifier's line carries its accuracy, as the course's MNIST exercise prints it
      const bool accuracy = kind.metric() == Metric::accuracy;
      std::printf("[%lld/%lld] Train loss: %.5f, Validation loss: %.5f%s%s%s\n", (long long)st.epoch + 1,
                  (long long)plan.epochs, train_loss, val, accuracy ? ", Validation accuracy: " : "",
                  accuracy ? metric_text(kind.metric(), valid).c_str() : "", epoch_done ? "" : " (partial epoch)");
      std::printf("      epoch time %s, %.0f %s/s, val %s %s\n", format_duration(seconds_since(clock.start)).c_str(),
                  clock.rows_per_second(), data->row_unit().c_str(),
                  kind.metric() == Metric::perplexity ? "ppl" : "accuracy", metric_text(kind.metric(), valid).c_str());
      std::fflush(stdout);
      Json j = Json::object();
      j["type"] = "epoch";
      j["step"] = st.global_step;
      j["epoch"] = st.epoch + 1;
      j["train_loss"] = train_loss;
      j["val_loss"] = val;
      j[accuracy ? "val_accuracy" : "val_ppl"] = metric_value(kind.metric(), valid);
      j["tokens_per_s"] = clock.rows_per_second();
      j["epoch_seconds"] = seconds_since(clock.start);
      jsonl->write(j);
      tb->add_scalar("Loss/train", float(train_loss), st.epoch + 1);
      tb->add_scalar("Loss/val", float(val), st.epoch + 1);
      tb->add_scalar(accuracy ? "Accuracy/val" : "Perplexity/val", float(metric_value(kind.metric(), valid)),
                     st.epoch + 1);
    }
    if (val < st.best_val) {
      PhaseScope phase(Phase::checkpoint);
      st.best_val = val;
      finish_async_save();
      saver->weights("model_best", st);
    }
    if (epoch_done) {
      ++st.epoch;
      st.batch_in_epoch = 0;
      st.epoch_loss_sum = 0.0;
    }
    checkpoint();
    watch->end_interval("epoch end");
  }

  // After the last step: a resumable checkpoint where it stopped, model_final, the pipeline's
  // timeline, the test loss, summary.json.
  void finish(int threads) {
    if (last_checkpoint_step != st.global_step) checkpoint(true);  // a run always ends resumable where it stopped
    finish_async_save();
    saver->weights("model_final", st);
    watch->gather_trace();
    watch->write_resources(jsonl.get(), tb.get(), true);
    const int64_t T = model->sample_shape().targets;
    const Json step_time = watch->step_summary(double(batch_split.global(dp) * T));
    const EvalResult test =
        evaluate(eval_pass(), par->eval_in_lockstep(), *test_set, batch_split.micro_batch, 0, precision, &mesh->dp());
    const MemoryAccount memory = memory_account(parts(), saver->buffer_bytes(), start_rss);
    const Peaks peaks = gather_peaks(world, *dev, memory.total());
    par->gather_pipeline_costs();
    if (!root) return;
    const double tps = st.train_seconds > 0 ? double(st.train_tokens) / st.train_seconds : 0.0;
    const int R = world.size();
    const std::string of_rank =
        R > 1 ? " (rank " + std::to_string(peaks.rss_rank) + ", the most of " + std::to_string(R) + " ranks)" : "";
    const std::string unit = data->row_unit();
    std::printf("Test loss: %.5f, test %s: %s (%lld %s); trained %lld steps at %.0f %s/s, peak memory %.0f MiB%s%s\n",
                test.loss, metric_name(kind.metric()).c_str(), metric_text(kind.metric(), test).c_str(),
                (long long)test.rows, unit.c_str(), (long long)st.global_step, tps, unit.c_str(), peaks.rss_mb(),
                of_rank.c_str(),
                peaks.device_mb() > 0 ? (", GPU " + std::to_string(int64_t(peaks.device_mb())) + " MiB").c_str() : "");
    // NCCL work runs on the GPU's own clock, so the host-side overlap figures hold for Gloo only
    const Json figures = par->figures(dev->kind() == DeviceKind::cpu);
    print_parallel_figures(figures);
    std::printf("memory of rank 0: peak %.0f MiB resident, %.0f MiB of it accounted (%s), %.0f MiB not\n",
                peaks.rss_mb_of(0), peaks.accounted_mb_of(0), memory.describe().c_str(),
                peaks.rss_mb_of(0) - peaks.accounted_mb_of(0));
    Json summary = run_summary(parts(), st, test, peaks, memory, figures, threads, tps, device_seconds);
    add_speed(summary, step_time);
    write_file_atomic(run_dir + "/summary.json", summary.dump(2) + "\n");
    log_eval("test", test, st.batch_in_epoch > 0 ? st.epoch + 1 : st.epoch);  // the last step's epoch
    tb->add_scalar("Loss/test", float(test.loss), st.global_step);
    tb->add_scalar(kind.metric() == Metric::accuracy ? "Accuracy/test" : "Perplexity/test",
                   float(metric_value(kind.metric(), test)), st.global_step);
    tb->flush();
    watch->write_trace();  // last: the other ranks are done with every collective
  }

  // summary.json's step time (JobWatch::step_summary) and the speed over the same steps.
  void add_speed(Json& summary, Json step_time) const {
    const double tps = step_time["steady_rows_per_s"].get<double>();
    step_time.erase("steady_rows_per_s");
    const double peak = peak_tflops();
    summary["step_time"] = std::move(step_time);
    summary["steady_tokens_per_s"] = tps;
    add_compute_rate(summary, tps);
    summary["peak_tflops"] = peak > 0 ? Json(peak) : Json(nullptr);
    if (cfg.train.sample_every_s > 0) summary["resources"] = watch->resources_summary();
  }
};

Trainer::Trainer(RunConfig config, std::string run_dir, bool resume, World& world, const std::string& resume_checkpoint)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(run_dir), resume, resume_checkpoint, world)) {}
Trainer::~Trainer() = default;
void Trainer::run() { impl_->run(); }

}  // namespace dtrain
