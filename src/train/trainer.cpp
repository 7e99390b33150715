// Trainer (see trainer.hpp): the loop of a run. step() runs one optimizer step (its math is
// train_step.cpp's) and times it; around it run_epoch() hands each step's figures to the run log and
// lets validation and checkpoints decide when they are due. The parts come from setup.hpp.
#include "train/trainer.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/atomic_file.hpp"
#include "core/job_exit.hpp"
#include "core/limits.hpp"
#include "core/phase_clock.hpp"
#include "data/loader.hpp"
#include "metrics/progress.hpp"
#include "train/job_stop.hpp"
#include "train/report/memory_account.hpp"
#include "train/setup.hpp"
#include "train/train_step.hpp"

namespace dtrain {

namespace {
using Clock = std::chrono::steady_clock;

// How many optimizer steps the run takes: per epoch, in all, and the epochs they span.
struct StepPlan {
  int64_t batches = 0;    // loader batches per rank and epoch
  int64_t per_epoch = 0;  // optimizer steps per epoch
  int64_t total = 0;      // optimizer steps in all (train.epochs, cut by train.max_steps)
  int64_t epochs = 0;
};

// An epoch's training time and rows (tokens), for its throughput.
struct EpochClock {
  Clock::time_point start = Clock::now();
  int64_t rows = 0;
  double step_seconds = 0.0;
  double rows_per_second() const { return step_seconds > 0 ? double(rows) / step_seconds : 0.0; }
};

// What one optimizer step did.
struct StepDone {
  int64_t batches = 0;    // loader batches it took (its micro-steps)
  int64_t rows = 0;       // rows of the loss, every rank's
  double loss_sum = 0.0;  // its micro-batches' mean losses summed (the epoch line's terms)
  double seconds = 0.0;
  StepFigures figures;  // for its train record
};
}  // namespace

struct Trainer::Impl {
  TrainingParts run;  // what setup built: data, device, mesh, model, start point, run dir, log
  TrainerState& state;
  ParallelModel& parallel;
  RunLog& log;
  JobStop stop;                 // the stop before the job ends (signals, train.stop_before)
  bool stopping = false;        // the ranks agreed to stop after the step just done
  double device_seconds = 0.0;  // step time on the device's clock

  Impl(RunConfig cfg, std::string dir, bool resume, const std::string& from, World& world)
      : run(std::move(cfg), std::move(dir), resume, from, world),
        state(run.state),
        parallel(*run.parallel),
        log(*run.log),
        stop(world, run.cfg.train.stop_before) {}

  // One optimizer step over the next grad_accum loader batches (fewer at an epoch's end): the math is
  // train_step's; here what the step is made of, and its time.
  StepDone step(const StepPlan& plan, BatchLoader& loader, Batch& batch) {
    const auto t0 = Clock::now();
    run.dev->timer_start();
    const int64_t T = parallel.model().sample_shape().targets;  // rows of the loss per sample
    StepSpec spec;
    spec.base = context_base(T);
    spec.step = state.global_step;
    spec.total_steps = plan.total;
    spec.micro = std::min(run.batch_split.accum, plan.batches - state.batch_in_epoch);
    // the step's samples over all ranks (an epoch's last step may have micro-batches of other sizes)
    const auto [samples, uneven] = run.samples_of_batches(state.batch_in_epoch, spec.micro);
    spec.samples = samples;
    spec.uneven = uneven;
    spec.micro_batch = run.batch_split.micro_batch;
    spec.grad_clip = run.cfg.optim.grad_clip;
    const StepResult r = train_step(parallel, spec, [&]() -> Batch& {
      PhaseScope waiting(Phase::data);
      require(loader.next(batch), "internal: the loader ran out of batches mid-step");
      return batch;
    });
    device_seconds += run.dev->timer_seconds();
    return {spec.micro, samples * T, r.loss_sum, seconds_since(t0), {r.loss_sum / double(spec.micro), r.norm, r.lr}};
  }

  // What every micro-step of the current step shares (the rest: ParallelModel::training_context).
  StepContext context_base(int64_t T) const {
    StepContext ctx;
    ctx.T = T;
    ctx.dropout = run.kind.dropout(run.cfg.model);
    ctx.seed = run.cfg.train.seed;
    ctx.step = uint32_t(state.global_step);
    ctx.precision = run.precision;
    return ctx;
  }

  // Where the run stands after a step, and the step in the run log.
  void count(const StepDone& s, EpochClock& clock) {
    ++state.global_step;
    state.batch_in_epoch += s.batches;
    state.epoch_loss_sum += s.loss_sum;
    state.train_seconds += s.seconds;
    state.train_tokens += s.rows;
    clock.rows += s.rows;
    clock.step_seconds += s.seconds;
    log.count_step(s.rows, s.seconds);
  }

  StepPlan plan_steps(const BatchLoader& loader) const {
    const int64_t E = run.cfg.train.epochs, A = run.batch_split.accum;
    StepPlan p;
    p.batches = loader.num_batches();
    p.per_epoch = (p.batches + A - 1) / A;
    p.total = E > 0 ? E * p.per_epoch : run.cfg.train.max_steps;
    if (run.cfg.train.max_steps > 0) p.total = std::min(p.total, run.cfg.train.max_steps);
    p.epochs = E > 0 ? E : (p.total + p.per_epoch - 1) / p.per_epoch;
    return p;
  }

  RunEnd train() {
    if (stop.asked_before_start()) return stop_before_first_step();
    const int threads = omp_get_max_threads();  // as configure_threads set them
    // Room beside the planned memory for the threads' stacks (OpenMP's, the loader's, the process
    // group's, a background save's) and what oneDNN maps: below it a library fails uncatchably.
    require_address_space(int64_t(threads + 3) * thread_stack_bytes(),
                          "this rank's " + std::to_string(threads + 3) + " threads (" +
                              std::to_string(thread_stack_bytes() >> 20) + " MiB of stack each) and oneDNN's kernels",
                          "lower train.batch_size (and raise train.grad_accum) or train.threads");
    DistributedSampler sampler = run.train_sampler();
    BatchLoader loader(*run.train_set, sampler, run.batch_split.micro_batch, false, true, run.global_batches());
    const StepPlan plan = plan_steps(loader);
    print_run_start(run.report_parts(), plan.per_epoch, threads);
    ProgressLine progress(run.root && run.cfg.train.progress);
    run.watch->start(state.global_step);
    Batch batch;
    bool over = state.global_step >= plan.total;
    while (!over && state.epoch < plan.epochs) over = run_epoch(plan, sampler, loader, batch, progress);
    if (stopping && state.global_step < plan.total) return save_to_requeue();
    finish(threads);
    return RunEnd::finished;
  }

  // The ranks agreed to stop (stop.agreed): a checkpoint where they stand, written now, and the line
  // that says so; no model_final, no summary.json (the run is not over).
  RunEnd save_to_requeue() {
    const double seconds = run.checkpoints->save_now(state);
    log.flush();
    if (run.root)
      std::printf("stopping: %s; saved the checkpoint of step %lld in %.1f s (%s/checkpoints); exit status %d: "
                  "requeue the job, and `--resume auto` goes on from there\n",
                  stop.reason().c_str(), (long long)state.global_step, seconds, run.run_dir.c_str(),
                  kExitSavedForRequeue);
    return RunEnd::stopped_to_requeue;
  }

  // A stop asked while the run was being set up: nothing new to save.
  RunEnd stop_before_first_step() {
    if (run.root)
      std::printf("stopping before the first step: %s; nothing new to save (the run stands at step %lld); exit "
                  "status %d: requeue the job, and `--resume auto` goes on from there\n",
                  stop.reason().c_str(), (long long)state.global_step, kExitSavedForRequeue);
    return RunEnd::stopped_to_requeue;
  }

  // The rest of the current epoch (from where a resumed run stands), then its end: the epoch line,
  // validation, model_best, a checkpoint. Returns whether the run is over.
  bool run_epoch(const StepPlan& plan, DistributedSampler& sampler, BatchLoader& loader, Batch& batch,
                 ProgressLine& progress) {
    const int64_t A = run.batch_split.accum;
    sampler.set_epoch(state.epoch);
    loader.start_epoch();
    for (int64_t skip = 0; skip < state.batch_in_epoch; ++skip) loader.next(batch);
    const int64_t steps_done = (state.batch_in_epoch + A - 1) / A;
    // what this epoch will run: the whole epoch, or up to train.max_steps
    const int64_t epoch_end = std::min(plan.per_epoch, steps_done + (plan.total - state.global_step));
    EpochClock clock;
    char prefix[64];
    std::snprintf(prefix, sizeof prefix, "[%lld/%lld]", (long long)state.epoch + 1, (long long)plan.epochs);
    while (!stopping && state.global_step < plan.total && state.batch_in_epoch < plan.batches) {
      stop.start_step();
      const StepDone done = step(plan, loader, batch);
      count(done, clock);
      // The step's time ends here; the validation and checkpoint after it count in the next step's.
      run.watch->end_step(state.global_step);
      if (state.global_step % run.cfg.train.log_every == 0)
        log_step(done.figures);  // before a checkpoint marks the log
      progress.update(prefix, (state.batch_in_epoch + A - 1) / A, epoch_end,
                      state.epoch_loss_sum / double(state.batch_in_epoch), clock.rows_per_second());
      if (run.evaluator->due(state.global_step))
        log.eval("val", state.global_step, state.epoch + 1, run.evaluator->validate());
      const bool loop_ends = state.global_step >= plan.total || state.batch_in_epoch >= plan.batches;
      if (run.checkpoints->due(state.global_step, loop_ends)) run.checkpoints->save(state);
      stopping = stop.agreed();
    }
    progress.clear();
    if (state.batch_in_epoch == 0) return true;
    // stopped mid-epoch (not at the run's end): train() saves where it stands
    if (stopping && state.global_step < plan.total && state.batch_in_epoch < plan.batches) return true;
    end_epoch(plan, clock);
    return stopping || state.global_step >= plan.total;
  }

  // The last step's train record (every rank takes part: the loss is averaged, the phases gathered).
  void log_step(const StepFigures& last) {
    const double loss = mean_over_data_parallel(run.world, run.dp, last.loss);
    const ExpertLoad load = parallel.take_expert_load();  // (every rank: summed over them)
    Json record = Json::object();
    log.expert_load(record, load, state.global_step);
    const PhaseSeconds phases = run.watch->fill_train_record(record);
    run.watch->write_resources(log.jsonl(), log.tensorboard());
    log.train(std::move(record), state.global_step, state.epoch + 1, loss, last, phases);
  }

  // The course's epoch line (mean of batch means, averaged over ranks, and the validation loss), its
  // metrics, model_best when validation improved, and a checkpoint (the epoch closed when done).
  void end_epoch(const StepPlan& plan, const EpochClock& clock) {
    EpochFigures e;
    e.epoch = state.epoch + 1;
    e.epochs = plan.epochs;
    e.whole = state.batch_in_epoch >= plan.batches;
    e.train_loss = mean_over_data_parallel(run.world, run.dp, state.epoch_loss_sum / double(state.batch_in_epoch));
    e.valid = run.evaluator->validate();
    e.rows_per_second = clock.rows_per_second();
    e.seconds = seconds_since(clock.start);
    log.epoch(state.global_step, e);
    if (e.valid.loss < state.best_val) {
      PhaseScope phase(Phase::checkpoint);
      state.best_val = e.valid.loss;
      run.checkpoints->weights("model_best", state);
    }
    if (e.whole) {
      ++state.epoch;
      state.batch_in_epoch = 0;
      state.epoch_loss_sum = 0.0;
    }
    run.checkpoints->save(state);
    run.watch->end_interval("epoch end");
  }

  // After the last step: a resumable checkpoint where it stopped, model_final, the pipeline's
  // timeline, the test loss, summary.json.
  void finish(int threads) {
    if (!run.checkpoints->saved_at(state.global_step))
      run.checkpoints->save(state, true);  // always resumable at the end
    run.checkpoints->weights("model_final", state);
    run.watch->gather_trace();
    run.watch->write_resources(log.jsonl(), log.tensorboard(), true);
    const int64_t T = parallel.model().sample_shape().targets;
    const Json step_time = run.watch->step_summary(double(run.batch_split.global(run.dp) * T));
    const EvalResult test = run.evaluator->test();
    const MemoryAccount memory = memory_account(run.report_parts(), run.saver->buffer_bytes(), run.start_rss);
    const Peaks peaks = gather_peaks(run.world, *run.dev, memory.total());
    parallel.gather_figures();
    if (!run.root) return;
    const double tps = state.train_seconds > 0 ? double(state.train_tokens) / state.train_seconds : 0.0;
    // NCCL work runs on the GPU's own clock, so the host-side overlap figures hold for Gloo only
    const Json figures = parallel.figures(run.dev->kind() == DeviceKind::cpu);
    print_run_end(run.report_parts(), state, test, peaks, memory, figures, tps);
    Json summary = run_summary(run.report_parts(), state, test, peaks, memory, figures, threads, tps, device_seconds);
    add_speed(summary, step_time);
    write_file_atomic(run.run_dir + "/summary.json", summary.dump(2) + "\n");
    log.eval("test", state.global_step, state.batch_in_epoch > 0 ? state.epoch + 1 : state.epoch,
             test);  // the last step's epoch
    log.test_scalars(state.global_step, test);
    log.flush();
    run.watch->write_trace();  // last: the other ranks are done with every collective
  }

  // summary.json's step time (JobWatch::step_summary) and the speed over the same steps.
  void add_speed(Json& summary, Json step_time) const {
    const double tps = step_time["steady_rows_per_s"].get<double>();
    step_time.erase("steady_rows_per_s");
    const double peak = log.peak_tflops();
    summary["step_time"] = std::move(step_time);
    summary["steady_tokens_per_s"] = tps;
    log.add_compute_rate(summary, tps);
    summary["peak_tflops"] = peak > 0 ? Json(peak) : Json(nullptr);
    if (run.cfg.train.sample_every_s > 0) summary["resources"] = run.watch->resources_summary();
  }
};

Trainer::Trainer(RunConfig config, std::string run_dir, bool resume, World& world, const std::string& resume_checkpoint)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(run_dir), resume, resume_checkpoint, world)) {}
Trainer::~Trainer() = default;
RunEnd Trainer::run() { return impl_->train(); }

}  // namespace dtrain
