// dtrain: the command-line program (train, eval, generate, data, ckpt, debug, plan, report, scale). Thin: parses arguments
// and calls the library; a user error prints one line and exits with status 2.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/job_exit.hpp"
#include "core/limits.hpp"
#include "core/openmp_wait.hpp"
#include "core/output_path.hpp"
#include "data/idx.hpp"
#include "data/prepare.hpp"
#include "data/prepare_images.hpp"
#include "data/token_file.hpp"
#include "data/vocab.hpp"
#include "metrics/chrome_trace.hpp"
#include "metrics/html_report.hpp"
#include "models/registry.hpp"
#include "parallel/pp/schedule.hpp"
#include "train/checkpoint_tools.hpp"
#include "train/debug_dump.hpp"
#include "train/device_setup.hpp"
#include "train/elastic.hpp"
#include "train/classify.hpp"
#include "train/generate.hpp"
#include "train/run_report.hpp"
#include "train/scaling_study.hpp"
#include "train/trainer.hpp"

using namespace dtrain;

namespace {

const char* kUsage = R"(dtrain — train models (model.kind; `dtrain config keys` lists the kinds), on one process or many

usage:
  dtrain train --config FILE [--set key=value ...] [--run-dir DIR]
  dtrain train --resume RUN_DIR|CHECKPOINT [--run-dir DIR] [--set key=value ...]
  dtrain eval --checkpoint DIR [--data DIR] [--split valid|test] [--batch-size N] [--threads N]
              [--precision f32|bf16]
  dtrain generate --checkpoint DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]
  dtrain predict --checkpoint DIR --input FILE [--format idx|raw|auto] [--top K] [--batch-size N]
                 [--threads N] [--precision f32|bf16]
                 (an image classifier's classes for IDX images or raw uint8 pixels, a line per image)
  dtrain data prepare --input PATH --out DIR [--no-lowercase] [--no-eos] [--min-freq N] [--max-vocab N]
                      [--valid-fraction F] [--test-fraction F]   (plain text: split by paragraphs)
  dtrain data builtin --out DIR        (the offline default corpus: Debian's licence texts)
  dtrain data prepare --format idx --input DIR --out DIR [--valid-count N] [--seed S] [--classes N]
                      [--mean M --std S]   (MNIST-format images: train-images-idx3-ubyte[.gz], …;
                      found without --format too; valid is N train images, 5000 by default, by a
                      seeded shuffle; mean and std computed over train unless given)
  dtrain data fashion-mnist --out DIR [--valid-count N] [--seed S] [--mean M --std S]
                                       (Fashion-MNIST from Debian's package dataset-fashion-mnist)
  dtrain ckpt inspect DIR             (layout it was saved from, step, tensors, sizes)
  dtrain ckpt verify DIR              (every checksum)
  dtrain ckpt export DIR --out FILE.safetensors [--optimizer]   (whole weights + FILE.config.json beside)
  dtrain ckpt import FILE.safetensors --config CONFIG --out DIR [--vocab vocab.txt]
  dtrain debug dump --config FILE [--set key=value ...] --out DIR [--steps N]
  dtrain plan --pp P --microbatches M --schedule gpipe|1f1b|interleaved-1f1b|zb-h1|zb-v [--virtual V]
              [--costs F,B,I,W[,COMM][;F,B,I,W per further stage]] [--save LIST.txt] [--trace timeline.json]
  dtrain plan --file LIST.txt [--costs ...] [--trace ...]   (a pipeline schedule checked and simulated,
              printed as a time × rank grid; docs/pipeline.md)
  dtrain config keys                   (every config key: default, type or range, meaning)
  dtrain report RUN [RUN ...] [--out FILE]   (one self-contained HTML page: losses, throughput, step phases,
              resources, checkpoints, config; several runs overlaid; default RUN/report.html, or
              ./report.html for several runs)
  dtrain scale --config FILE --nproc 1,2,4,8 [--mode strong|weak] [--threads-per-rank T] [--steps N]
               [--set key=value ...] [--launcher dtrun|srun] --out DIR
              (a scaling study: --steps steps, 20 by default, at each worker count into DIR/nproc_N, then
              DIR/scaling.csv and DIR/scaling.html; strong keeps train.batch_size as the global batch, weak
              as the batch per rank; docs/watching.md)

Data parallel: start it with `dtrun --nproc-per-node N dtrain train ...` (see `dtrun --help`),
`srun dtrain train ...` or `mpirun -np N dtrain train ...`; docs/distributed.md.
)";

// Largest count an option takes (a vocabulary, a batch, a thread count): far past any real one.
constexpr int64_t kMaxCount = int64_t(1) << 31;

// Options: --name value pairs (repeatable --set), flags without value.
struct Args {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> opts;
  std::vector<std::string> flags;

  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = opts.find(k);
    return it == opts.end() ? def : it->second;
  }
  std::string need(const std::string& k) const {
    auto it = opts.find(k);
    require(it != opts.end(), "missing --" + k + ": see `dtrain --help`");
    return it->second;
  }
  bool flag(const std::string& f) const { return std::find(flags.begin(), flags.end(), f) != flags.end(); }
  // --k as a whole number within [lo, hi] (def when absent); one line naming the option otherwise.
  int64_t integer(const std::string& k, int64_t def, int64_t lo, int64_t hi) const {
    std::string v = get(k);
    if (v.empty()) return def;
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    require(*end == 0 && errno == 0, "--" + k + " " + v + " is not a whole number: give one from " +
                                         std::to_string(lo) + " to " + std::to_string(hi));
    require(x >= lo && x <= hi,
            "--" + k + " " + v + " is outside " + std::to_string(lo) + ".." + std::to_string(hi) + ": give one within");
    return x;
  }
  double number(const std::string& k, double def) const {
    std::string v = get(k);
    if (v.empty()) return def;
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    require(*end == 0 && std::isfinite(x), "--" + k + " " + v + " is not a number");
    return x;
  }
};

Args parse(int argc, char** argv, int first, const std::vector<std::string>& flag_names,
           const std::vector<std::string>& option_names) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    std::string name = s.substr(2), value;
    auto eq = name.find('=');
    if (eq != std::string::npos && name != "set") {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      a.opts.emplace(name, value);
      continue;
    }
    if (std::find(flag_names.begin(), flag_names.end(), name) != flag_names.end()) {
      a.flags.push_back(name);
      continue;
    }
    require(std::find(option_names.begin(), option_names.end(), name) != option_names.end(),
            "unknown option --" + name + ": see `dtrain --help`");
    require(i + 1 < argc, "option --" + name + " needs a value: see `dtrain --help`");
    a.opts.emplace(name, argv[++i]);
  }
  return a;
}

void apply_sets(RunConfig& cfg, const Args& a) {
  auto [lo, hi] = a.opts.equal_range("set");
  for (auto it = lo; it != hi; ++it) {
    auto eq = it->second.find('=');
    require(eq != std::string::npos, "--set " + it->second + " is not key=value: write e.g. --set train.lr=0.001");
    cfg.set(it->second.substr(0, eq), it->second.substr(eq + 1));
  }
}

// {"section": {"key": value, ...}, ...} (config.json, or trainer.json's "config") into cfg.
void apply_json_config(RunConfig& cfg, const Json& j, const std::string& path) {
  require(j.is_object(), path + " is a JSON " + j.type_name() + ", expected {\"train\": {...}, ...}; fix the JSON text");
  for (const auto& [section, obj] : j.items()) {
    require(obj.is_object(), path + ": \"" + section + "\" is a JSON " + obj.type_name() +
                                 ", expected an object of keys; fix the JSON text");
    for (const auto& [name, v] : obj.items()) cfg.set(section + "." + name, json_config_text(v), path);
  }
}

void load_json_config(RunConfig& cfg, const std::string& path) {
  apply_json_config(cfg, parse_json(read_file(path, kMaxSmallFileBytes, "config"), path), path);
}

int cmd_train(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {}, {"config", "set", "run-dir", "resume"});
  RunConfig cfg;
  std::string resume = a.get("resume");
  while (resume.size() > 1 && resume.back() == '/') resume.pop_back();  // a tab-completed folder
  std::string run_dir = a.get("run-dir"), checkpoint;
  const DistEnv env = detect_env();
  // Restarted by dtrun with `--resume RUN/checkpoints/step_N`: the run goes on in RUN from its newest
  // checkpoint (step_N itself may have been pruned since), with the config the first attempt wrote.
  const std::filesystem::path resume_parent = std::filesystem::path(resume).lexically_normal().parent_path();
  const bool restarted_in_run = env.restart_count > 0 && resume_parent.filename() == "checkpoints" &&
                                (run_dir.empty() || run_dir == resume_parent.parent_path().string()) &&
                                std::filesystem::exists(resume_parent.parent_path() / "config.json");
  if (restarted_in_run) {
    run_dir = resume_parent.parent_path().string();
    load_json_config(cfg, run_dir + "/config.json");
    checkpoint = resume;
  } else if (!resume.empty() && std::filesystem::exists(resume + "/config.json")) {  // a run dir
    require(run_dir.empty() || run_dir == resume, "--resume " + resume + " is a run dir and continues in it: leave "
                                                  "out --run-dir, or resume from one of its checkpoints instead");
    load_json_config(cfg, resume + "/config.json");
    run_dir = resume;
  } else if (!resume.empty()) {  // a checkpoint folder: its run's config, continued here or in --run-dir
    require(std::filesystem::exists(resume + "/trainer.json"),
            "--resume " + resume + ": neither a run dir (config.json) nor a resumable checkpoint (trainer.json): "
            "give the run dir of an earlier `dtrain train` or one of its RUN/checkpoints/step_… folders");
    const std::string path = resume + "/trainer.json";
    const Json saved = parse_json(read_checkpoint_file(resume, "trainer.json"), path);
    apply_json_config(cfg, json_at(saved, "config", path), path);
    if (run_dir.empty() && resume_parent.filename() == "checkpoints") run_dir = resume_parent.parent_path().string();
    require(!run_dir.empty(), "--resume " + resume + " is a checkpoint outside a run dir: say where the run goes "
                              "on with --run-dir DIR");
    checkpoint = resume;
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
  Trainer t(cfg, run_dir, !resume.empty(), world, checkpoint);
  t.run();
  world.shutdown();
  if (world.rank() == 0)
    std::printf("run dir: %s (metrics.jsonl, summary.json, model_best/, model_final/, checkpoints/)\n", run_dir.c_str());
  return 0;
}

int cmd_eval(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {}, {"checkpoint", "data", "split", "batch-size", "threads", "precision"});
  configure_threads(a.integer("threads", 0, 0, kMaxCount), "--threads");
  const std::string ck = a.need("checkpoint");
  const ModelConfig mc = checkpoint_model_config(ck);
  const ModelKind& kind = kind_of(mc);
  const SampleShape sample = kind.sample_shape(mc);
  std::string data = a.get("data");
  if (data.empty()) {
    const std::string path = ck + "/trainer.json";
    require(std::filesystem::exists(path), "checkpoint " + ck + " does not say which data it was trained on: "
                                           "give --data DIR");
    data = json_get<std::string>(parse_json(read_checkpoint_file(ck, "trainer.json"), path), "config.data.dir", path);
  }
  const std::string split = a.get("split", "test");
  require(split == "valid" || split == "test" || split == "train", "--split " + split + ": use valid, test or train");
  const std::unique_ptr<DataSource> source = DataSource::open(data, sample.input);
  require_same_data(ck, *source, "evaluate");
  ModelConfig fitted = mc;  // the data must be what the model was trained on
  try {
    kind.fit_to_data(fitted, source->facts(), data);
  } catch (const Error& e) {
    throw Error("checkpoint " + ck + " does not fit the data of " + data + " (" + e.what() +
                "): evaluate on the data the model was trained on");
  }
  const int64_t B = a.integer("batch-size", 64, 1, kMaxCount);
  Model model(kind.units(mc, cpu_device()), B);
  load_weights(ck, mc, model);
  const std::unique_ptr<Dataset> ds = source->split(split, sample, 0);
  const Precision p = a.get("precision", "f32") == "bf16" ? Precision::bf16 : Precision::f32;
  EvalResult r = evaluate(model, *ds, B, 0, p);
  require(std::isfinite(r.loss), "the " + split + " loss of " + ck + " is not finite: its weights hold NaN or "
                                 "infinity (a diverged run); evaluate an earlier checkpoint");
  std::printf("%s loss: %.5f, %s: %s (%lld %s)\n", split.c_str(), r.loss, metric_name(kind.metric()).c_str(),
              metric_text(kind.metric(), r).c_str(), (long long)r.rows, source->row_unit().c_str());
  if (kind.metric() == Metric::accuracy) {  // a classifier: which classes it confuses
    const Confusion c = confusion_matrix(model, *ds, B, p);
    require(c.right() == int64_t(std::llround(r.metric)), "internal: the confusion matrix's diagonal (" +
                                                              std::to_string(c.right()) + ") is not the accuracy's count");
    std::printf("%s", confusion_text(c, source->class_names()).c_str());
  }
  return 0;
}

int cmd_predict(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {}, {"checkpoint", "input", "format", "top", "batch-size", "threads", "precision"});
  configure_threads(a.integer("threads", 0, 0, kMaxCount), "--threads");
  PredictOptions o;
  o.checkpoint = a.need("checkpoint");
  o.input = a.need("input");
  o.format = a.get("format", "auto");
  o.top = a.integer("top", 1, 1, 1 << 20);
  o.batch_size = a.integer("batch-size", 64, 1, kMaxCount);
  o.precision = a.get("precision", "f32") == "bf16" ? Precision::bf16 : Precision::f32;
  predict_images(o, stdout);
  return 0;
}

int cmd_generate(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {}, {"checkpoint", "prompt", "tokens", "temperature", "top-k", "seed", "threads"});
  configure_threads(a.integer("threads", 0, 0, kMaxCount), "--threads");
  GenerateOptions o;
  o.checkpoint = a.need("checkpoint");
  o.prompt = a.get("prompt");
  o.tokens = a.integer("tokens", 50, 0, kMaxGenerateTokens);
  o.temperature = float(a.number("temperature", 1.0));
  o.top_k = a.integer("top-k", 0, 0, kMaxCount);
  o.seed = uint64_t(a.integer("seed", 1, 0, INT64_MAX));
  generate_text(o, [](std::string_view t) {  // each token as it comes
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
  });
  std::printf("\n");
  return 0;
}

// `data prepare --format idx` (or a folder that holds IDX files) and `data fashion-mnist`.
int prepare_images(const std::string& sub, const Args& a) {
  for (const char* k : {"min-freq", "max-vocab", "valid-fraction", "test-fraction"})
    require(a.get(k).empty(), std::string("--") + k + " is an option of text data: image data takes --valid-count, "
                              "--seed, --classes, --mean and --std");
  for (const char* k : {"no-lowercase", "no-eos"})
    require(!a.flag(k), std::string("--") + k + " is an option of text data: image data takes --valid-count, --seed, "
                        "--classes, --mean and --std");
  ImagePrepareOptions o;
  o.out_dir = a.need("out");
  o.valid_count = a.integer("valid-count", o.valid_count, 1, INT64_MAX);
  o.seed = uint64_t(a.integer("seed", 1, 0, INT64_MAX));
  require(a.get("mean").empty() == a.get("std").empty(), "--mean and --std go together: give both, or neither to "
                                                         "have them computed over the train images");
  o.given_mean_std = !a.get("mean").empty();
  o.mean = a.number("mean", 0.0);
  o.std = a.number("std", 0.0);
  ImageMeta m;
  if (sub == "fashion-mnist") {
    require(a.get("input").empty() && a.get("classes").empty() && a.get("format").empty(),
            "dtrain data fashion-mnist reads " + std::string(kFashionMnistDir) + " and takes no --input, --format or "
            "--classes: for other IDX files use `dtrain data prepare --format idx --input DIR`");
    m = prepare_fashion_mnist(o);
  } else {
    o.input = a.need("input");
    o.classes = int(a.integer("classes", 0, 2, kMaxImageClasses));
    m = prepare_idx(o);
  }
  std::printf("%s\n", prepared_images_summary(o.out_dir, m).c_str());
  return 0;
}

int cmd_data(int argc, char** argv) {
  require(argc >= 3, "usage: dtrain data prepare|builtin|fashion-mnist …: see `dtrain --help`");
  const std::string sub = argv[2];
  Args a = parse(argc, argv, 3, {"no-lowercase", "no-eos"},
                 {"input", "out", "min-freq", "max-vocab", "valid-fraction", "test-fraction", "format", "valid-count",
                  "seed", "classes", "mean", "std"});
  const std::string format = a.get("format");
  require(format.empty() || format == "text" || format == "idx",
          "--format " + format + ": use text (a corpus) or idx (MNIST-format images)");
  require(format.empty() || sub == "prepare", "--format is an option of `dtrain data prepare`: see `dtrain --help`");
  std::error_code ec;
  const bool idx = sub == "fashion-mnist" ||
                   (sub == "prepare" && (format == "idx" || (format.empty() && !a.get("input").empty() &&
                                                             std::filesystem::is_directory(a.get("input"), ec) &&
                                                             find_idx_files(a.get("input")))));
  if (idx) return prepare_images(sub, a);
  for (const char* k : {"valid-count", "seed", "classes", "mean", "std"})
    require(a.get(k).empty(), std::string("--") + k + " is an option of image data (--format idx): text takes "
                              "--valid-fraction and --test-fraction");
  PrepareOptions o;
  o.out_dir = a.need("out");
  o.lowercase = !a.flag("no-lowercase");
  o.eos = !a.flag("no-eos");
  o.min_freq = int(a.integer("min-freq", 1, 1, kMaxCount));
  o.max_vocab = a.integer("max-vocab", 0, 0, kMaxCount);
  o.valid_fraction = a.number("valid-fraction", o.valid_fraction);
  o.test_fraction = a.number("test-fraction", o.test_fraction);
  if (sub == "builtin") {
    check_text_output(o.out_dir);
    const std::string text = o.out_dir + "/text";
    make_builtin_corpus(text);
    o.input = text;
  } else {
    require(sub == "prepare", "unknown command `dtrain data " + sub + "`: use prepare, builtin or fashion-mnist");
    o.input = a.need("input");
  }
  PrepareReport r = prepare_dataset(o);
  std::printf("prepared %s (%s): vocabulary %lld words; tokens train %lld, valid %lld, test %lld\n",
              o.out_dir.c_str(), r.format.c_str(), (long long)r.vocab_size, (long long)r.train_tokens,
              (long long)r.valid_tokens, (long long)r.test_tokens);
  if (r.invalid_utf8 > 0)
    std::fprintf(stderr,
                 "dtrain: warning: %lld invalid UTF-8 sequences read as U+FFFD (the first in %s at byte %lld): "
                 "convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8) if those words matter\n",
                 (long long)r.invalid_utf8, r.invalid_utf8_file.c_str(), (long long)r.invalid_utf8_offset);
  return 0;
}

int cmd_ckpt(int argc, char** argv) {
  require(argc >= 4, "usage: dtrain ckpt inspect|verify|export|import …: see `dtrain --help`");
  const std::string sub = argv[2];
  Args a = parse(argc, argv, 3, {"optimizer"}, {"out", "config", "vocab"});
  require(a.positional.size() == 1, "dtrain ckpt " + sub + " takes one folder or file: see `dtrain --help`");
  const std::string what = a.positional[0];
  if (sub == "inspect") {
    std::fputs(inspect_checkpoint(what).c_str(), stdout);
    return 0;
  }
  if (sub == "verify") {
    const std::vector<std::string> problems = verify_checkpoint_folder(what);
    if (problems.size() == 1) throw Error("checkpoint " + what + " is damaged: " + problems[0] + "; resume from an older one");
    for (const std::string& p : problems) std::fprintf(stderr, "dtrain: %s\n", p.c_str());
    require(problems.empty(), "checkpoint " + what + " is damaged (" + std::to_string(problems.size()) +
                                  " problems above): resume from an older one");
    std::printf("checkpoint %s: every chunk and file matches its checksum\n", what.c_str());
    return 0;
  }
  if (sub == "export") {
    const std::string out = a.need("out");
    export_checkpoint(what, out, a.flag("optimizer"));
    std::printf("exported %s to %s (and its model config to %s)\n", what.c_str(), out.c_str(),
                exported_config_path(out).c_str());
    return 0;
  }
  require(sub == "import", "unknown command `dtrain ckpt " + sub + "`: use inspect, verify, export or import");
  const std::string out = a.need("out");
  import_checkpoint(what, a.need("config"), out, a.get("vocab"));
  std::printf("imported %s as checkpoint %s (start from it with --set train.init_from=%s)\n", what.c_str(),
              out.c_str(), out.c_str());
  return 0;
}

int cmd_debug(int argc, char** argv) {
  require(argc >= 3 && std::string(argv[2]) == "dump", "usage: dtrain debug dump …: see `dtrain --help`");
  Args a = parse(argc, argv, 3, {}, {"config", "set", "out", "steps"});
  RunConfig cfg;
  cfg.load_toml(a.need("config"));
  apply_sets(cfg, a);
  configure_threads(cfg.train.threads);
  dump_parity(cfg, a.need("out"), a.integer("steps", 20, 1, kMaxCount));
  return 0;
}

// dtrain plan: a pipeline schedule (generated, or a user's list) validated, simulated and shown.
int cmd_plan(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {}, {"pp", "microbatches", "schedule", "virtual", "file", "save", "trace", "costs"});
  if (!a.positional.empty())
    throw Error("dtrain plan takes no argument `" + a.positional[0] + "`: see `dtrain --help`");
  const ActionCosts costs = a.get("costs").empty() ? ActionCosts{} : parse_action_costs(a.get("costs"));
  for (const char* k : {"save", "trace"})
    if (!a.get(k).empty()) check_output_file(a.get(k), std::string("--") + k);
  Schedule s;
  const std::string file = a.get("file");
  if (!file.empty()) {
    for (const char* k : {"pp", "microbatches", "schedule", "virtual"})
      require(a.get(k).empty(), std::string("--") + k + " with --file: the list gives its own shape; leave out --" + k);
    s = read_schedule(file);
  } else {
    const std::string name = a.need("schedule");
    const int default_virtual = name == "interleaved-1f1b" || name == "zb-v" ? 2 : 1;
    a.need("pp");  // both required without --file
    a.need("microbatches");
    s = make_schedule(name, int(a.integer("pp", 0, 1, kMaxPipelineRanks)), int(a.integer("virtual", default_virtual, 1, kMaxVirtualStages)),
                      int(a.integer("microbatches", 0, 1, kMaxMicrobatches)));
  }
  require(costs.stages.empty() || int(costs.stages.size()) == s.stages(),
          "--costs gives " + std::to_string(costs.stages.size()) + " stages' costs, the schedule has " +
              std::to_string(s.stages()) + " stages: give one F,B,I,W per stage (joined by ';'), or one for all");
  const std::vector<std::string> problems = validate(s);
  for (const std::string& p : problems) std::fprintf(stderr, "dtrain: %s\n", p.c_str());
  require(problems.empty(), "schedule " + s.name + " is not valid (" +
                                (problems.size() > kMaxProblemsListed ? std::string("the problems above")
                                                                      : std::to_string(problems.size()) + " problems above") +
                                "): fix the lists, or start from one that `dtrain plan --save` writes");
  const Simulation sim = simulate(s, costs);
  std::fputs(render_grid(s, sim).c_str(), stdout);
  std::printf("%s\n", cpu_bf16_warning().empty() ? "this CPU has native bf16: train.precision = bf16 is fast here"
                                                   : cpu_bf16_warning().c_str());
  if (const std::string save = a.get("save"); !save.empty()) {
    write_file_atomic(save, write_schedule(s));
    std::printf("wrote the lists to %s (edit them and check with dtrain plan --file %s)\n", save.c_str(), save.c_str());
  }
  if (const std::string trace = a.get("trace"); !trace.empty()) {
    std::vector<TraceEvent> events;
    for (int r = 0; r < s.pp; ++r)
      for (const TimedAction& t : sim.ranks[r])  // one time unit shown as one millisecond
        events.push_back({r, "compute", to_string(t.action), t.start * 1e-3, (t.end - t.start) * 1e-3, ""});
    write_chrome_trace(trace, events);
    std::printf("wrote the simulated timeline to %s (open it in ui.perfetto.dev; 1 time unit = 1 ms)\n",
                trace.c_str());
  }
  return 0;
}

// This process's global rank (0 for a single process, or when the launcher's variables are bad).
int rank_or_zero() {
  try {
    return detect_env().rank;
  } catch (const std::exception&) {
    return 0;
  }
}

// dtrain report: one HTML page about one run or several overlaid.
int cmd_report(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {}, {"out"});
  require(!a.positional.empty(), "dtrain report needs a run dir: dtrain report RUN [RUN ...] [--out FILE]");
  const std::string out = a.get("out", default_report_path(a.positional));
  write_run_report(a.positional, out);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

// dtrain scale: a scaling study over worker counts (docs/watching.md).
int cmd_scale(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {}, {"config", "nproc", "mode", "threads-per-rank", "steps", "set", "launcher", "out"});
  if (!a.positional.empty())
    throw Error("dtrain scale takes no argument `" + a.positional[0] + "`: see `dtrain --help`");
  ScalingOptions o;
  o.config = a.need("config");
  o.nproc = a.need("nproc");
  o.out = a.need("out");
  o.mode = a.get("mode", o.mode);
  o.launcher = a.get("launcher", o.launcher);
  o.threads_per_rank = int(a.integer("threads-per-rank", o.threads_per_rank, 1, 1 << 16));
  o.steps = a.integer("steps", o.steps, 1, kMaxCount);
  auto [lo, hi] = a.opts.equal_range("set");
  for (auto it = lo; it != hi; ++it) o.sets.push_back(it->second);
  run_scaling_study(o, stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ensure_passive_openmp_wait(argv);  // may run this program again, before any thread starts
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach dtrun (or a log file) as they are written
  // What to lower when memory runs out, by command.
  const std::string memory_fix = cmd == "eval"       ? "lower --batch-size"
                                 : cmd == "train"    ? "lower train.batch_size (and raise train.grad_accum to keep the global batch)"
                                 : cmd == "debug"    ? "lower train.batch_size"
                                                     : "free memory";
  install_fault_handlers(memory_fix);
  try {
    if (cmd == "train") return cmd_train(argc, argv);
    if (cmd == "eval") return cmd_eval(argc, argv);
    if (cmd == "generate") return cmd_generate(argc, argv);
    if (cmd == "predict") return cmd_predict(argc, argv);
    if (cmd == "data") return cmd_data(argc, argv);
    if (cmd == "debug") return cmd_debug(argc, argv);
    if (cmd == "ckpt") return cmd_ckpt(argc, argv);
    if (cmd == "plan") return cmd_plan(argc, argv);
    if (cmd == "report") return cmd_report(argc, argv);
    if (cmd == "scale") return cmd_scale(argc, argv);
    if (cmd == "config") {
      require(argc == 3 && std::string(argv[2]) == "keys", "usage: dtrain config keys (every key, its default and "
                                                            "meaning): see `dtrain --help`");
      std::fputs(RunConfig::describe_keys().c_str(), stdout);
      return 0;
    }
    throw Error("unknown command `" + cmd +
                "`: use train, eval, generate, predict, data, ckpt, debug, plan, report, scale or config (see --help)");
  } catch (const StopForNewNodes& e) {
    // Every rank stopped at the same checkpoint; dtrun restarts the job with the waiting nodes.
    if (rank_or_zero() == 0)
      std::printf("stopping after the checkpoint of step %lld: nodes wait to join, and dtrun restarts the job with "
                  "them\n", (long long)e.step);
    return kExitForNewNodes;
  } catch (const ConfigError& e) {
    // Every rank found it: rank 0 says it, the others wait for the launcher to stop them (dtrun
    // and mpirun stop a job whose rank failed) and say it only if nothing does.
    const int rank = rank_or_zero();
    if (rank > 0) std::this_thread::sleep_for(std::chrono::seconds(10));
    if (rank > 0) std::fprintf(stderr, "dtrain: error: (rank %d) %s\n", rank, e.what());
    else std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    return std::getenv("DTRAIN_AGENT") ? kExitConfigError : 2;  // dtrun: do not restart what will fail again
  } catch (const Error& e) {
    std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc& e) {
    const auto* known = dynamic_cast<const AllocationFailed*>(&e);
    std::fprintf(stderr, "dtrain: error: %s\n",
                 out_of_memory(known ? known->subject() : "`dtrain " + cmd + "`", memory_fix).what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {  // a path the user gave that cannot be used
    std::fprintf(stderr, "dtrain: error: %s on %s: check the path and its permissions\n",
                 e.code().message().c_str(), e.path1().c_str());
    return 2;
  } catch (const std::system_error& e) {  // a thread the system would not start (EAGAIN)
    if (e.code() != std::errc::resource_unavailable_try_again) {
      std::fprintf(stderr, "dtrain: internal error: %s\n", e.what());
      return 3;
    }
    std::fprintf(stderr, "dtrain: error: %s\n",
                 thread_start_failed("a thread", "raise the limit, or lower train.threads").what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain: internal error: %s\n", e.what());
    return 3;
  }
}
