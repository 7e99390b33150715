// bench_train: training-step throughput of a dtrain model (model.kind; the Transformer by default) on random tokens, or
// random images for an image model — the dtrain side of bench/compare.sh (bench/torch_reference_bench.py is the PyTorch
// side). Prints one JSON line.
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

#include "core/error.hpp"
#include "core/json.hpp"
#include "metrics/progress.hpp"
#include "models/registry.hpp"
#include "optim/optimizer.hpp"
#include "train/config.hpp"

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
    "  --profile    on a GPU, also the device time of each kernel family per timed step (\"ops\";\n"
    "               DTRAIN_CUDA_PROFILE=1: events around every kernel call, which cost some speed)\n";

int64_t to_int(const std::string& flag, const std::string& v, int64_t min) {
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  dtrain::require(!v.empty() && *end == '\0' && x >= min,
                  flag + " " + v + " is not an integer >= " + std::to_string(min) + ": give e.g. 10");
  return x;
}

using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string config_path;
    std::vector<std::pair<std::string, std::string>> sets;
    int64_t vocab = 0, batch = 0, steps = 10, warmup = 2, threads = 2, seed = 1;
    std::string precision_name, device_name = "cpu";
    bool profile = false;
    for (int i = 1; i < argc; ++i) {
      const std::string f = argv[i];
      if (f == "-h" || f == "--help") {
        std::fputs(kUsage, stdout);
        return 0;
      }
      if (f == "--profile") {
        profile = true;
        continue;
      }
      dtrain::require(i + 1 < argc, "flag " + f + " needs a value: see --help");
      const std::string v = argv[++i];
      if (f == "--config") config_path = v;
      else if (f == "--set") {
        const auto eq = v.find('=');
        dtrain::require(eq != std::string::npos && eq > 0, "--set " + v + " is not key=value: write e.g. --set model.dim=256");
        sets.emplace_back(v.substr(0, eq), v.substr(eq + 1));
      } else if (f == "--vocab") vocab = to_int(f, v, 2);
      else if (f == "--batch") batch = to_int(f, v, 1);
      else if (f == "--steps") steps = to_int(f, v, 1);
      else if (f == "--warmup") warmup = to_int(f, v, 0);
      else if (f == "--threads") threads = to_int(f, v, 1);
      else if (f == "--seed") seed = to_int(f, v, 0);
      else if (f == "--precision") precision_name = v;
      else if (f == "--device") device_name = v;
      else throw dtrain::Error("unknown flag " + f + ": see --help");
    }
    dtrain::require(!config_path.empty(), "no --config given: pass a preset such as configs/bench-large.toml");

    dtrain::RunConfig cfg;
    cfg.load_toml(config_path);
    for (const auto& [k, v] : sets) cfg.set(k, v);
    const dtrain::ModelKind& kind = dtrain::kind_of(cfg.model);
    if (vocab > 0) cfg.set("model.vocab_size", std::to_string(vocab), "--vocab");
    if (batch > 0) cfg.train.batch_size = batch;
    if (!precision_name.empty()) cfg.set("train.precision", precision_name, "--precision");
    cfg.train.threads = int(threads);
    cfg.validate();
    const bool images = kind.sample_shape(cfg.model).input == dtrain::InputKind::images;
    if (!images)
      dtrain::require(cfg.model.values.value("vocab_size", 0) > 1, "no vocabulary size: pass --vocab V (e.g. 12000)");
    kind.validate(cfg.model, true);

    omp_set_num_threads(int(threads));
    const dtrain::Precision precision = cfg.train.compute_precision();
    if (profile) setenv("DTRAIN_CUDA_PROFILE", "1", 1);  // read when the device is made
    auto dev = dtrain::make_device(device_name, 0);
    const int64_t B = cfg.train.batch_size;
    dtrain::Model model(kind.units(cfg.model, *dev), B, *dev);
    const dtrain::SampleShape sample = model.sample_shape();
    // I input values and T loss rows per sample (tokens: the window twice; images: pixels, one label)
    const int64_t I = sample.inputs, T = sample.targets, V = model.outputs();
    model.init_weights(cfg.train.seed);
    dtrain::Optimizer opt(cfg.optim, dtrain::unit_shards(model.units()), *dev);

    // Random batches, drawn up front (like the torch script): inputs and targets per step. Tokens are
    // int32 ids below V; pixels are floats from N(0, 1) (normalised images), each label below V.
    const int64_t total = warmup + steps;
    std::vector<int32_t> inputs(size_t(total * B * I)), targets(size_t(total * B * T));
    std::mt19937_64 rng{static_cast<uint64_t>(seed)};
    std::uniform_int_distribution<int32_t> tok(0, int32_t(V - 1));
    if (images) {
      std::normal_distribution<float> pixel(0.0f, 1.0f);
      std::vector<float> px(inputs.size());
      for (auto& x : px) x = pixel(rng);
      std::memcpy(inputs.data(), px.data(), px.size() * sizeof(float));  // 4 bytes a value either way
    } else {
      for (auto& x : inputs) x = tok(rng);
    }
    for (auto& x : targets) x = tok(rng);

    std::vector<double> times;
    double loss = 0.0;
    for (int64_t s = 0; s < total; ++s) {
      const auto t0 = Clock::now();
      dtrain::StepContext ctx;
      ctx.B = B;
      ctx.T = T;
      ctx.training = true;
      ctx.dropout = kind.dropout(cfg.model);
      ctx.seed = cfg.train.seed;
      ctx.step = uint32_t(s);
      ctx.loss_scale = 1.0f / float(B * T);
      ctx.precision = precision;
      model.zero_grad();
      model.queue_forward_backward({sample, B, inputs.data() + size_t(s * B * I), targets.data() + size_t(s * B * T)}, ctx);
      opt.step(opt.lr_at(s, total));
      loss = model.take_loss() / double(B * T);  // waits for the device: the step is over
      dtrain::require(std::isfinite(loss), "loss is not finite at step " + std::to_string(s) + ": lower train.lr");
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      if (s >= warmup) times.push_back(dt);
      if (s + 1 == warmup) dev->op_times();  // the profile counts the timed steps only
    }
    const std::vector<dtrain::OpTime> ops = dev->op_times();

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
    out["device"] = dev->describe();
    out["peak_device_mb"] = r1(double(dev->peak_bytes()) / double(1 << 20));
    out["model"] = model_json;
    if (!ops.empty()) {  // per timed step: ms, share of the profiled time, TFLOP/s of the products
      double total_s = 0.0;  // the calls' time; a part ("call/part") is inside its call's
      for (const auto& o : ops)
        if (o.name.find('/') == std::string::npos) total_s += o.seconds;
      dtrain::Json rows = dtrain::Json::array();
      for (const auto& o : ops)
        rows.push_back({{"op", o.name}, {"ms", r3(o.seconds * 1e3 / double(steps))}, {"share", r3(o.seconds / total_s)},
                        {"calls", o.calls / steps}, {"tflops", o.flops > 0 ? r1(o.flops / o.seconds / 1e12) : 0.0}});
      out["ops"] = rows;
      out["profiled_ms"] = r3(total_s * 1e3 / double(steps));
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
}
