// The run's phase figures and trace (see job_watch.hpp).
#include "train/report/job_watch.hpp"

#include <algorithm>
#include <cstdio>

#include "core/log_level.hpp"
#include "core/trace.hpp"
#include "metrics/chrome_trace.hpp"
#include "metrics/jsonl.hpp"
#include "metrics/resource_gather.hpp"
#include "metrics/resource_json.hpp"
#include "metrics/tensorboard.hpp"

namespace dtrain {

namespace {

constexpr uint32_t kTraceTag = 0x7EACE;

double total(const PhaseSeconds& p) {
  double s = 0.0;
  for (double v : p) s += v;
  return s;
}

Json phases_json(const double* p) {
  Json j = Json::object();
  for (int i = 0; i < kPhases; ++i) j[phase_name(Phase(i))] = p[i];
  return j;
}

// A rank's spans as JSON text: [[start, end, track, name, args], …] on its own clock.
std::string spans_text(const std::vector<TraceSpan>& spans) {
  Json list = Json::array();
  for (const TraceSpan& s : spans) list.push_back({s.start, s.end, s.track, s.name, s.args});
  return list.dump();
}

}  // namespace

void JobWatch::Sums::add(const PhaseSeconds& p, size_t n) {
  for (int i = 0; i < kPhases; ++i) phases[size_t(i)] += p[size_t(i)];
  step += total(p);
  ++steps;
  changes += int64_t(n);
}

JobWatch::JobWatch(const TrainConfig& cfg, World& world, ComputeDevice& dev, std::string run_dir)
    : cfg_(cfg), world_(world), dev_(dev), run_dir_(std::move(run_dir)) {
  std::tie(trace_first_, trace_last_) = cfg_.trace_range();
}

JobWatch::~JobWatch() { Trace::set_on(false); }  // (the sampler's thread stops with it)

void JobWatch::start(int64_t steps_done) {
  ProcessGroup& all = world_.all();
  offsets_ = measure_clock_offsets(all);
  hosts_ = world_.hosts();
  double start0 = monotonic_seconds();
  all.broadcast(&start0, 1, ElemType::f64, 0);
  start_ = start0;  // rank 0's clock
  first_step_ = steps_done + 1;
  change_cost_ = PhaseClock::change_cost();
  clock_ = std::make_unique<PhaseClock>(dev_.phase_timer());
  const bool in_window = first_step_ >= trace_first_ && (trace_last_ == 0 || first_step_ <= trace_last_);
  Trace::set_on(cfg_.trace && in_window);
  resource_max_ = std::make_unique<ResourceMax>();
  if (cfg_.sample_every_s > 0) {
    ComputeDevice* dev = &dev_;
    ResourceSampler::GpuProbe gpu;
    if (dev->kind() != DeviceKind::cpu) gpu = [dev] { return dev->usage(); };
    sampler_ = std::make_unique<ResourceSampler>(cfg_.sample_every_s, world_.rank(), [this] { return run_seconds(); },
                                                 gpu);
  }
}

void JobWatch::write_resources(JsonlWriter* jsonl, TensorBoardWriter* tb, bool final) {
  if (!sampler_) return;
  std::vector<ResourceSample> mine = sampler_->take();
  if (final) mine.push_back(sampler_->sample_now());
  const std::vector<ResourceSample> every = gather_resource_samples(world_.all(), mine);
  if (world_.rank() != 0) return;
  static const std::vector<std::string> figures = resource_figures();
  for (const ResourceSample& s : every) {
    resource_max_->add(s);
    Json j = to_json(s, hosts_[size_t(s.rank)]);
    jsonl->write(j);
    const std::string prefix = "Resources/rank" + std::to_string(s.rank) + "/";
    for (const std::string& k : figures)
      if (j.contains(k)) tb->add_scalar(prefix + k, j[k].get<float>(), s.step);
  }
}

Json JobWatch::resources_summary() const { return to_json(*resource_max_); }

double JobWatch::run_seconds() const {
  return monotonic_seconds() - offsets_.offset_s[size_t(world_.rank())] - start_;
}

void JobWatch::trace_step(const char* name, int64_t step) {
  const std::vector<PhaseClock::Interval> spans = clock_->host_intervals();
  if (spans.empty()) return;
  Trace::record({spans.front().start, spans.back().end, "steps",
                 step > 0 ? std::string(name) + " " + std::to_string(step) : std::string(name), ""});
  for (const PhaseClock::Interval& i : spans) Trace::record({i.start, i.end, "phases", phase_name(i.phase), ""});
}

void JobWatch::end_step(int64_t step) {
  const PhaseSeconds& p = clock_->end_step();
  if (sampler_) sampler_->set_step(step);
  since_log_.add(p, clock_->last_changes());
  every_.add(p, clock_->last_changes());
  if (step >= first_step_ + kWarmupSteps) run_.add(p, clock_->last_changes());
  if (!cfg_.trace) return;
  if (Trace::on()) {
    trace_step("step", step);
    if (trace_last_ != 0 && step >= trace_last_) Trace::set_on(false);
  } else if (step + 1 == trace_first_) {
    Trace::set_on(true);
  }
}

void JobWatch::end_interval(const char* what) {
  clock_->end_step();
  if (Trace::on()) trace_step(what, 0);
}

PhaseSeconds JobWatch::fill_train_record(Json& record) {
  const int R = world_.size();
  const double n = double(std::max<int64_t>(since_log_.steps, 1));
  std::vector<double> mine(kPhases + 1), every(size_t(R) * (kPhases + 1));
  mine[0] = since_log_.step / n;
  for (int i = 0; i < kPhases; ++i) mine[size_t(i + 1)] = since_log_.phases[size_t(i)] / n;
  world_.all().allgather(mine.data(), every.data(), kPhases + 1, ElemType::f64);
  since_log_ = Sums{};
  record["t"] = clock_->last_end() - offsets_.offset_s[size_t(world_.rank())] - start_;  // the step's end
  record["step_seconds"] = every[0];
  record["phases"] = phases_json(&every[1]);
  if (R > 1) {
    Json steps = Json::array(), phases = Json::array();
    for (int r = 0; r < R; ++r) {
      steps.push_back(every[size_t(r) * (kPhases + 1)]);
      phases.push_back(phases_json(&every[size_t(r) * (kPhases + 1) + 1]));
    }
    record["step_seconds_by_rank"] = std::move(steps);
    record["phases_by_rank"] = std::move(phases);
  }
  PhaseSeconds root{};
  for (int i = 0; i < kPhases; ++i) root[size_t(i)] = every[size_t(i + 1)];
  return root;
}

Json JobWatch::step_summary(double rows_per_step) {
  const int R = world_.size();
  // the steps after warm-up, or every step when there are none after it
  const Sums& s = run_.steps > 0 ? run_ : every_;
  const double n = double(std::max<int64_t>(s.steps, 1));
  constexpr int W = kPhases + 3;  // mean step, phases, steps, seconds without eval
  std::vector<double> mine(W), every(size_t(R) * W);
  mine[0] = s.step / n;
  for (int i = 0; i < kPhases; ++i) mine[size_t(i + 1)] = s.phases[size_t(i)] / n;
  mine[kPhases + 1] = double(s.steps);
  mine[kPhases + 2] = s.step - s.phases[size_t(Phase::eval)];
  world_.all().allgather(mine.data(), every.data(), W, ElemType::f64);
  auto at = [&](int r, int k) { return every[size_t(r) * W + size_t(k)]; };
  Json j = Json::object();
  j["warmup_steps"] = run_.steps > 0 ? kWarmupSteps : 0;
  j["steps"] = int64_t(at(0, kPhases + 1));
  j["mean_s"] = at(0, 0);
  Json phases = Json::object();
  for (int i = 0; i < kPhases; ++i) {
    int slowest = 0;
    for (int r = 1; r < R; ++r)
      if (at(r, i + 1) > at(slowest, i + 1)) slowest = r;
    phases[phase_name(Phase(i))] = {{"mean_s", at(0, i + 1)},
                                    {"share", at(0, 0) > 0 ? at(0, i + 1) / at(0, 0) : 0.0},
                                    {"slowest_rank", slowest},
                                    {"slowest_mean_s", at(slowest, i + 1)}};
  }
  j["phases"] = phases;
  Json by_rank = Json::array();
  for (int r = 0; r < R; ++r) by_rank.push_back({{"mean_s", at(r, 0)}, {"phases", phases_json(&every[size_t(r) * W + 1])}});
  j["by_rank"] = std::move(by_rank);
  // what timing the phases cost: rank 0's changes per step at the cost measured at start
  const double changes = double(s.changes) / n;
  j["phase_changes_per_step"] = changes;
  j["timing_overhead_share"] = at(0, 0) > 0 ? changes * change_cost_ / at(0, 0) : 0.0;
  // throughput over the same steps, paced by the slowest rank (training time: validation left out)
  double slowest_seconds = 0.0;
  for (int r = 0; r < R; ++r) slowest_seconds = std::max(slowest_seconds, at(r, kPhases + 2));
  j["steady_rows_per_s"] = slowest_seconds > 0 ? rows_per_step * at(0, kPhases + 1) / slowest_seconds : 0.0;
  if (world_.rank() == 0 && logs_at(LogLevel::info)) {
    std::printf("step time: %.1f ms, mean of %lld steps%s%s; timing them cost %.2g%% (%.0f phase changes per step)\n",
                1e3 * at(0, 0), (long long)at(0, kPhases + 1), run_.steps > 0 ? " after the first" : "",
                R > 1 ? " (rank 0; the slowest rank's in brackets)" : "", 100.0 * j["timing_overhead_share"].get<double>(),
                changes);
    for (int i = 0; i < kPhases; ++i) {
      const Json& p = phases[phase_name(Phase(i))];
      const double mean = p["mean_s"].get<double>();
      if (mean <= 0 && p["slowest_mean_s"].get<double>() <= 0) continue;
      std::printf("  %-10s %9.2f ms %5.1f%%", phase_name(Phase(i)), 1e3 * mean, 100.0 * p["share"].get<double>());
      if (R > 1)
        std::printf("   (rank %d: %.2f ms)", p["slowest_rank"].get<int>(), 1e3 * p["slowest_mean_s"].get<double>());
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  return j;
}

void JobWatch::gather_trace() {
  if (!cfg_.trace) return;
  Trace::set_on(false);
  ProcessGroup& all = world_.all();
  const int R = all.size(), me = all.rank();
  const std::string text = spans_text(Trace::take());
  const int64_t dropped = int64_t(Trace::dropped());
  if (me != 0) {
    const int64_t head[2] = {int64_t(text.size()), dropped};
    all.send_async(head, sizeof head, 0, kTraceTag)->wait();
    all.send_async(text.data(), text.size(), 0, kTraceTag)->wait();
    return;
  }
  trace_texts_ = {text};
  trace_dropped_ = dropped;
  for (int r = 1; r < R; ++r) {
    int64_t head[2] = {0, 0};
    all.recv_async(head, sizeof head, r, kTraceTag)->wait();
    std::string theirs(size_t(head[0]), '\0');
    all.recv_async(theirs.data(), theirs.size(), r, kTraceTag)->wait();
    trace_dropped_ += head[1];
    trace_texts_.push_back(std::move(theirs));
  }
}

void JobWatch::write_trace() {
  if (!cfg_.trace || world_.rank() != 0) return;
  // on rank 0's clock, from the start of training
  std::vector<TraceEvent> events;
  for (size_t r = 0; r < trace_texts_.size(); ++r) {
    const double shift = offsets_.offset_s[r] + start_;
    for (const Json& s : Json::parse(trace_texts_[r])) {
      const double a = s[0].get<double>() - shift, b = s[1].get<double>() - shift;
      events.push_back({int(r), s[2].get<std::string>(), s[3].get<std::string>(), a, b - a, s[4].get<std::string>()});
    }
    trace_texts_[r].clear();
  }
  const int R = world_.size();
  std::map<int, std::string> names;
  for (int r = 0; r < R; ++r) names[r] = "rank " + std::to_string(r) + " (" + hosts_[size_t(r)] + ")";
  Json other = {{"clock_offsets_s", offsets_.offset_s},
                {"clock_offset_error_s", offsets_.error_s},
                {"spans_dropped", trace_dropped_},
                {"steps", cfg_.trace_steps.empty() ? std::string("all") : cfg_.trace_steps},
                {"timebase", "seconds since training started, on rank 0's clock"}};
  write_chrome_trace(run_dir_ + "/trace.json", events, names, other);
  std::printf("trace of %zu spans from %d ranks: %s/trace.json (open it in ui.perfetto.dev)%s\n", events.size(), R,
              run_dir_.c_str(),
              trace_dropped_ ? (", " + std::to_string(trace_dropped_) + " spans past the limit left out").c_str() : "");
  std::fflush(stdout);
}

}  // namespace dtrain
