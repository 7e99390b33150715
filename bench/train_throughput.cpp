// bench_train: training-step throughput of a dtrain model (model.kind; the Transformer by default) on random tokens, or
// random images for an image model — the dtrain side of bench/compare.sh (bench/torch_reference_bench.py is the PyTorch
// side). Each step is the trainer's own (train_step, one process). Prints one JSON line.
// Usage: bench_train --config configs/bench-large.toml --vocab 12000 [--set key=value ...]
//        [--batch B] [--threads 2] [--precision f32|bf16] [--steps 10] [--warmup 2] [--seed 1]
//        [--device cpu|cuda] [--profile]  (bench/gpu_compare.sh runs it on a GPU)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/mesh.hpp"
#include "comm/world.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "metrics/progress.hpp"
#include "models/registry.hpp"
#include "parallel/plan.hpp"
#include "train/config.hpp"
#include "train/model_plan.hpp"
#include "train/train_step.hpp"

namespace {

const char* kUsage =
    "usage: bench_train --config FILE --vocab V [--set key=value ...] [--batch B] [--threads N]\n"
    "                   [--precision f32|bf16] [--steps N] [--warmup W] [--seed S]\n"
    "  --config     TOML preset (configs/*.toml); only [model], [train] and [optim] matter\n"
    "  --vocab      vocabulary size (the preset's data would set it; here tokens are random)\n"
    "               an image model (model.kind = cnn) takes --set model.in_channels=1 --set model.height=28\n"
    "               --set model.width=28 --set model.classes=10 instead (random pixels and labels)\n"
    "  --set        key=value override, as for `dtrain train` (repeatable)\n"
    "  --batch      samples per step (default: the preset's train.batch_size)\n"
    "  --threads    OpenMP threads (default 2)\n"
    "  --precision  f32 | bf16 (default: the preset's train.precision)\n"
    "  --steps      timed steps (default 10); --warmup untimed steps first (default 2)\n"
    "  --device     cpu (default) | cuda | cuda:N\n"
    "  --profile    also the time of each kernel family per timed step (\"ops\"; DTRAIN_PROFILE=1:\n"
    "               CUDA events on a GPU, the host's clock on the CPU, around every kernel call)\n";

int64_t to_int(const std::string& flag, const std::string& v, int64_t min) {
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  dtrain::require(!v.empty() && *end == '\0' && x >= min,
                  flag + " " + v + " is not an integer >= " + std::to_string(min) + ": give e.g. 10");
  return x;
}

using Clock = std::chrono::steady_clock;

struct Options {
  std::string config_path, precision_name, device_name = "cpu";
  std::vector<std::pair<std::string, std::string>> sets;
  int64_t vocab = 0, batch = 0, steps = 10, warmup = 2, threads = 2, seed = 1;
  bool profile = false, help = false;
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      o.help = true;
      return o;
    }
    if (f == "--profile") {
      o.profile = true;
      continue;
    }
    dtrain::require(i + 1 < argc, "flag " + f + " needs a value: see --help");
    const std::string v = argv[++i];
    if (f == "--config")
      o.config_path = v;
    else if (f == "--set") {
      const auto eq = v.find('=');
      dtrain::require(eq != std::string::npos && eq > 0,
                      "--set " + v + " is not key=value: write e.g. --set model.dim=256");
      o.sets.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (f == "--vocab")
      o.vocab = to_int(f, v, 2);
    else if (f == "--batch")
      o.batch = to_int(f, v, 1);
    else if (f == "--steps")
      o.steps = to_int(f, v, 1);
    else if (f == "--warmup")
      o.warmup = to_int(f, v, 0);
    else if (f == "--threads")
      o.threads = to_int(f, v, 1);
    else if (f == "--seed")
      o.seed = to_int(f, v, 0);
    else if (f == "--precision")
      o.precision_name = v;
    else if (f == "--device")
      o.device_name = v;
    else
      throw dtrain::Error("unknown flag " + f + ": see --help");
  }
  dtrain::require(!o.config_path.empty(), "no --config given: pass a preset such as configs/bench-large.toml");
  return o;
}

dtrain::RunConfig bench_config(const Options& o) {
  dtrain::RunConfig cfg;
  cfg.load_toml(o.config_path);
  for (const auto& [k, v] : o.sets) cfg.set(k, v);
  const dtrain::ModelKind& kind = dtrain::kind_of(cfg.model);
  if (o.vocab > 0) cfg.set("model.vocab_size", std::to_string(o.vocab), "--vocab");
  if (o.batch > 0) cfg.train.batch_size = o.batch;
  if (!o.precision_name.empty()) cfg.set("train.precision", o.precision_name, "--precision");
  cfg.train.threads = int(o.threads);
  cfg.validate();
  if (kind.sample_shape(cfg.model).input != dtrain::InputKind::images)
    dtrain::require(cfg.model.values.value("vocab_size", 0) > 1, "no vocabulary size: pass --vocab V (e.g. 12000)");
  kind.validate(cfg.model, true);
  return cfg;
}

// Random batches, drawn up front (like the torch script), one per step. Tokens are int32 ids below V;
// pixels are floats from N(0, 1) (normalised images), each label below V.
std::vector<dtrain::Batch> random_batches(const dtrain::SampleShape& sample, int64_t B, int64_t V, int64_t count,
                                          uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_int_distribution<int32_t> tok(0, int32_t(V - 1));
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  const bool images = sample.input == dtrain::InputKind::images;
  std::vector<dtrain::Batch> batches(static_cast<size_t>(count));
  for (dtrain::Batch& b : batches) {
    b.shape = sample;
    b.samples = B;
    if (images) {
      b.pixels.resize(size_t(B * sample.inputs));
      for (float& x : b.pixels) x = pixel(rng);
    } else {
      b.tokens.resize(size_t(B * sample.inputs));
      for (int32_t& x : b.tokens) x = tok(rng);
    }
  }
  for (dtrain::Batch& b : batches) {
    b.targets.resize(size_t(B * sample.targets));
    for (int32_t& x : b.targets) x = tok(rng);
  }
  return batches;
}

// The JSON line: step times over the timed steps, the model's figures, the profile per timed step.
dtrain::Json result_json(const Options& o, const dtrain::RunConfig& cfg, const dtrain::Model& model,
                         dtrain::ComputeDevice& dev, const std::vector<double>& times, double loss,
                         const std::vector<dtrain::OpTime>& ops) {
  const int64_t B = cfg.train.batch_size, steps = o.steps, warmup = o.warmup;
  const dtrain::SampleShape sample = model.sample_shape();
  const int64_t I = sample.inputs, T = sample.targets;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  double mean = 0.0;
  for (double t : times) mean += t;
  mean /= double(n);
  auto r3 = [](double x) { return std::round(x * 1e3) / 1e3; };
  auto r1 = [](double x) { return std::round(x * 10.0) / 10.0; };

  dtrain::Json model_json = dtrain::model_to_json(cfg.model);
  dtrain::Json out = dtrain::Json::object();
  out["tokens_per_s"] = r1(double(B * T) / median);
  out["step_ms"] = r3(median * 1e3);
  out["mean_step_ms"] = r3(mean * 1e3);
  out["min_step_ms"] = r3(sorted.front() * 1e3);
  out["peak_rss_mb"] = r1(dtrain::peak_rss_mb());
  out["loss"] = std::round(loss * 1e6) / 1e6;
  out["precision"] = cfg.train.precision;
  out["threads"] = omp_get_max_threads();
  out["batch"] = B;
  out["seq_len"] = T;
  out["samples_per_s"] = r1(double(B) / median);
  out["input_values"] = I;
  out["steps"] = steps;
  out["warmup"] = warmup;
  out["params"] = model.num_params();
  out["activation_bytes"] = int64_t(model.activation_bytes());
  out["train_flops_per_token"] = model.train_flops_per_sample() / double(sample.targets);
  out["native_bf16"] = dtrain::cpu_has_native_bf16();
  out["device"] = dev.describe();
  out["peak_device_mb"] = r1(double(dev.peak_bytes()) / double(1 << 20));
  out["model"] = model_json;
  if (!ops.empty()) {      // per timed step: ms, share of the profiled time, TFLOP/s of the products
    double total_s = 0.0;  // the calls' time; a part ("call/part") is inside its call's
    for (const auto& op : ops)
      if (op.name.find('/') == std::string::npos) total_s += op.seconds;
    dtrain::Json rows = dtrain::Json::array();
    for (const auto& op : ops)
      rows.push_back({{"op", op.name},
                      {"ms", r3(op.seconds * 1e3 / double(steps))},
                      {"share", r3(op.seconds / total_s)},
                      {"calls", op.calls / steps},
                      {"tflops", op.flops > 0 ? r3(op.flops / op.seconds / 1e12) : 0.0}});
    out["ops"] = rows;
    out["profiled_ms"] = r3(total_s * 1e3 / double(steps));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_options(argc, argv);
    if (o.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const dtrain::RunConfig cfg = bench_config(o);
    const dtrain::ModelKind& kind = dtrain::kind_of(cfg.model);
    omp_set_num_threads(int(o.threads));
    if (o.profile) setenv("DTRAIN_PROFILE", "1", 1);  // read when the device is made
    auto dev = dtrain::make_device(o.device_name, 0);
    // the trainer's model on one process: a mesh of one rank, the plan applied (nothing to split)
    dtrain::World world(dtrain::DistEnv{}, dtrain::Millis(60000));
    dtrain::DeviceMesh mesh(world, dtrain::MeshShape{});
    const int64_t B = cfg.train.batch_size, total = o.warmup + o.steps;
    const dtrain::UnitFactory units = [&](dtrain::TpSlice slice, dtrain::TpRegions& regions,
                                          dtrain::SequenceAttention* sequence, dtrain::ExpertExchange* experts) {
      return kind.units(cfg.model, *dev, slice, regions, sequence, experts);
    };
    // the trainer's plan for one process (bf16: activations that only products read kept in bf16)
    const dtrain::ParallelPlan plan = dtrain::parallel_plan_of(cfg, cfg.train.compute_precision(), 1, {B});
    dtrain::ParallelModel parallel(units, B, *dev, mesh, plan, cfg.optim, cfg.train.seed);
    const dtrain::SampleShape sample = parallel.model().sample_shape();
    std::vector<dtrain::Batch> batches = random_batches(sample, B, parallel.model().outputs(), total, uint64_t(o.seed));

    dtrain::StepSpec spec;  // every step: one batch of B samples
    spec.base.T = sample.targets;
    spec.base.dropout = kind.dropout(cfg.model);
    spec.base.seed = cfg.train.seed;
    spec.base.precision = cfg.train.compute_precision();
    spec.total_steps = total;
    spec.samples = spec.micro_batch = B;
    std::vector<double> times;
    double loss = 0.0;
    for (int64_t s = 0; s < total; ++s) {
      const auto t0 = Clock::now();
      spec.step = s;
      spec.base.step = uint32_t(s);
      loss = dtrain::train_step(parallel, spec, [&]() -> dtrain::Batch& { return batches[size_t(s)]; }).loss_sum;
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();  // the loss waited for the device
      if (s >= o.warmup) times.push_back(dt);
      if (s + 1 == o.warmup) dev->op_times();  // the profile counts the timed steps only
    }
    const std::vector<dtrain::OpTime> ops = dev->op_times();
    std::printf("%s\n", result_json(o, cfg, parallel.model(), *dev, times, loss, ops).dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
}
