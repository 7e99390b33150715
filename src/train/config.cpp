// RunConfig: the table of known keys with their parsers, TOML loading and validation.
#include "train/config.hpp"

#include <charconv>
#include <cstdlib>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "core/error.hpp"
#include "data/stage.hpp"
#include "core/input_file.hpp"
#include "core/limits.hpp"
#include "models/registry.hpp"

namespace dtrain {

namespace {

using Key = ConfigKey<RunConfig>;
using Table = ConfigKeyTable<RunConfig>;

constexpr int64_t kMaxCount = int64_t(1) << 31;  // batches, strides, epochs: far past any real run
constexpr int64_t kMaxSteps = int64_t(1) << 50;   // step counts
constexpr int64_t kMaxMesh = int64_t(1) << 20;    // one mesh dimension

#define INT_KEY DT_INT_KEY
#define FLOAT_KEY DT_FLOAT_KEY
#define BOOL_KEY DT_BOOL_KEY
#define STRING_KEY DT_STRING_KEY
#define CHOICE_KEY DT_CHOICE_KEY

// The data.* keys and the batch keys of train.*.
Table data_and_batch_keys() {
  return {
    STRING_KEY("data.dir", data.dir, "a folder made by `dtrain data prepare` or `dtrain data builtin`"),
    INT_KEY("data.stride", data.stride, 1, kMaxCount, "training windows start every this many tokens (the course: 1)"),
    INT_KEY("data.eval_stride", data.eval_stride, 0, kMaxCount,
            "validation and test windows start every this many tokens; 0: model.seq_len (each token scored once)"),
    BOOL_KEY("data.shuffle", data.shuffle, "training windows in a seeded random order each epoch"),
    {"data.mix",
     {"list", "sources drawn from by weight, [{dir = \"data/a\", weight = 0.7}, …]; given: data.dir is not read", 0,
      0, [](RunConfig& c, const std::string& v) { c.data.mix = parse_mix(v.empty() ? "[]" : v); },
      [](const RunConfig& c) {
        Json list = Json::array();
        for (const MixEntry& m : c.data.mix) list.push_back(Json{{"dir", m.dir}, {"weight", m.weight}});
        return list;
      }}},
    STRING_KEY("data.stage", data.stage,
               "copy the data to this node-local folder first (/dev/shm/NAME, a local disk): one copier per node"),
    BOOL_KEY("data.document_boundaries", data.document_boundaries,
             "token shards: windows stay within a document (false: they run on across the EOS between documents)"),
    INT_KEY("train.epochs", train.epochs, 0, kMaxCount, "passes over the training data; 0: train.max_steps decides"),
    INT_KEY("train.max_steps", train.max_steps, 0, kMaxSteps, "stop after this many optimizer steps in all; 0: no limit"),
    INT_KEY("train.batch_size", train.batch_size, 1, kMaxCount,
            "samples (token windows, images) per data-parallel rank and micro-step (the course's \"512 per GPU\")"),
    INT_KEY("train.grad_accum", train.grad_accum, 1, kMaxCount, "micro-steps whose gradients make one optimizer step"),
    INT_KEY("train.global_batch", train.global_batch, 0, kMaxCount,
            "samples per optimizer step over all ranks, kept at any data-parallel size (train.batch_size is then the "
            "most per rank and micro-step; the micro-steps follow); 0: batch_size × ranks × grad_accum"),
  };
}

// The parallel.* keys.
Table parallel_keys() {
  return {
    INT_KEY("parallel.dp", parallel.dp, 0, kMaxMesh, "data-parallel replicas (plain DDP's name for dp_replicate); 0: what the world leaves"),
    INT_KEY("parallel.pp", parallel.pp, -1, kMaxMesh, "pipeline stages; -1: what the world leaves"),
    INT_KEY("parallel.dp_replicate", parallel.dp_replicate, -1, kMaxMesh,
            "replicas of the (sharded) model; -1: what the world leaves"),
    INT_KEY("parallel.dp_shard", parallel.dp_shard, -1, kMaxMesh, "ranks that shard parameters, gradients and optimizer state (FSDP); -1: what the world leaves"),
    INT_KEY("parallel.tp", parallel.tp, -1, kMaxMesh, "tensor-parallel ranks (heads, feed-forward width, vocabulary split); -1: what the world leaves"),
    INT_KEY("parallel.cp", parallel.cp, 1, kMaxMesh,
            "context-parallel ranks: each holds a share of every sequence's positions (chunks i and 2·cp−1−i); "
            "parameters replicated, gradients reduced with the data-parallel ranks"),
    INT_KEY("parallel.ep", parallel.ep, 1, kMaxMesh,
            "expert-parallel ranks: a mixture of experts' experts split equally over runs of ep ranks of "
            "dp_shard × cp (tokens sent to them by all-to-all); must divide dp_shard × cp"),
    CHOICE_KEY("parallel.cp_mode", parallel.cp_mode, "ring|alltoall",
               "context parallel: ring (keys and values passed round the cp ranks, partial results merged by their "
               "log-sum-exp) or alltoall (heads scattered, sequence gathered: heads and kv heads divisible by cp)"),
    CHOICE_KEY("parallel.backend", parallel.backend, "auto|gloo|nccl|mpi",
               "collectives over: gloo (CPU), nccl (GPU), mpi (CPU; ranks started by mpirun or srun --mpi=pmix); "
               "auto: nccl on a GPU, else gloo"),
    {"parallel.bucket_mb",
     {"float", "DDP gradient bucket size in MB (PyTorch's default: 25); 0: an eighth of the gradients, 1 to 25 MB", 0, 0,
      [](RunConfig& c, const std::string& v) { c.parallel.bucket_mb = parse_config_float("parallel.bucket_mb", v, "--set"); },
      [](const RunConfig& c) { return Json(c.parallel.bucket_mb); }}},
    INT_KEY("parallel.timeout_s", parallel.timeout_s, 1, 30 * 24 * 3600,
            "seconds a rank waits for another in any collective or rendezvous before it names the missing one"),
    INT_KEY("parallel.fsdp_prefetch", parallel.fsdp_prefetch, 0, 64, "FSDP: units gathered ahead of the one computing"),
    BOOL_KEY("parallel.fsdp_reshard_after_forward", parallel.fsdp_reshard_after_forward,
             "FSDP: free gathered parameters after forward (FULL_SHARD); false keeps them to backward (SHARD_GRAD_OP)"),
    BOOL_KEY("parallel.tp_sequence", parallel.tp_sequence,
             "tensor parallel: also split norms, dropout and residuals by rows (sequence parallel)"),
    BOOL_KEY("parallel.tp_overlap", parallel.tp_overlap,
             "tensor parallel: run the region collectives beside the matmuls (row chunks, weight gradients); "
             "false: each waits where it is called"),
    INT_KEY("parallel.tp_overlap_chunks", parallel.tp_overlap_chunks, 1, 64,
            "tensor parallel with tp_overlap: row chunks of a row-parallel matmul, each chunk's all-reduce beside "
            "the next (chunks of at least 64 rows); 1: none (what measured fastest on 2 CPU cores)"),
    CHOICE_KEY("parallel.fsdp_reduce_dtype", parallel.fsdp_reduce_dtype, "f32|bf16",
               "FSDP: type gradients are reduced in (bf16 needs train.precision = bf16)"),
    CHOICE_KEY("parallel.pp_schedule", parallel.pp_schedule, "gpipe|1f1b|interleaved-1f1b|zb-h1|zb-v",
               "pipeline schedule (docs/pipeline.md)"),
    STRING_KEY("parallel.pp_schedule_file", parallel.pp_schedule_file,
               "a file of pipeline actions to run instead of parallel.pp_schedule (`dtrain plan --save` writes one)"),
    INT_KEY("parallel.pp_virtual", parallel.pp_virtual, 1, 64, "pipeline stages per rank (2 for interleaved-1f1b and zb-v)"),
    INT_KEY("parallel.microbatches", parallel.microbatches, 0, 4096, "pipeline micro-batches per pass; 0: as many as pipeline ranks"),
    STRING_KEY("parallel.pp_split", parallel.pp_split,
               "first unit of every stage but the first, e.g. \"3,5\"; \"\": stages balanced by cost"),
    STRING_KEY("parallel.pp_unit_costs", parallel.pp_unit_costs,
               "pipeline: each unit's cost for balancing the stages, in model order (a run's summary.json "
               "pp_unit_costs measures them); \"\": the units' training FLOPs"),
  };
}

// The rest of the train.* keys.
Table train_keys() {
  return {
    INT_KEY("train.threads", train.threads, 0, 1 << 16,
            "threads per rank, at most the CPUs it may use; 0: OMP_NUM_THREADS, else the CPUs of its affinity "
            "mask and cgroup quota divided by the ranks on its node"),
    INT_KEY("train.seed", train.seed, 0, INT64_MAX, "seeds initial weights, data order and dropout masks"),
    CHOICE_KEY("train.precision", train.precision, "f32|bf16", "bf16: bf16 matrix products, f32 master weights and accumulation"),
    CHOICE_KEY("train.recompute", train.recompute, "none|selective|full",
               "activations recomputed in backward instead of kept: selective: attention probabilities and "
               "activation outputs; full: all of each hidden unit's but its input (the same numbers, less memory)"),
    STRING_KEY("train.device", train.device, "auto (a GPU when one is visible and the CUDA backend loads, else "
               "the CPU; said in one line), cpu, cuda (one GPU per local rank) or cuda:N; also --set device=…"),
    BOOL_KEY("train.share_gpus", train.share_gpus,
             "let several ranks of a node use one GPU (refused by default: each gets a fraction of it, and NCCL "
             "may refuse it)"),
    FLOAT_KEY("train.lr", optim.lr, "learning rate (peak, with a schedule)"),
    INT_KEY("train.eval_every", train.eval_every, 0, kMaxSteps, "steps between validations besides epoch ends; 0: epoch ends only"),
    INT_KEY("train.eval_max_batches", train.eval_max_batches, 0, kMaxCount,
            "global batches per validation; 0: the whole validation split"),
    INT_KEY("train.checkpoint_every", train.checkpoint_every, 0, kMaxSteps,
            "steps between checkpoints besides epoch ends; 0: epoch ends only"),
    INT_KEY("train.keep_checkpoints", train.keep_checkpoints, 1, kMaxCount, "newest checkpoints kept under RUN/checkpoints"),
    CHOICE_KEY("train.checkpoint_format", train.checkpoint_format, "auto|full|sharded",
               "full: one safetensors file; sharded: one file per rank; auto: sharded when there are several ranks"),
    BOOL_KEY("train.checkpoint_async", train.checkpoint_async, "sharded checkpoints written in the background while training goes on"),
    STRING_KEY("train.init_from", train.init_from, "a checkpoint folder whose weights a fresh run starts from"),
    CHOICE_KEY("train.resume", train.resume, "no|auto",
               "auto: go on with the run dir's run when it holds one, else start it (`--resume auto`)"),
    FLOAT_KEY("train.stop_before", train.stop_before,
              "minutes before the job's end time (SLURM's) to save and stop at (exit 79); 0: on SIGUSR1/SIGTERM only"),
    INT_KEY("train.log_every", train.log_every, 1, kMaxSteps, "steps between metrics.jsonl points"),
    BOOL_KEY("train.progress", train.progress, "a progress line with ETA on a terminal"),
    BOOL_KEY("train.trace", train.trace,
             "RUN/trace.json: every rank's phases, units, collectives, pipeline actions (Chrome trace, Perfetto)"),
    STRING_KEY("train.trace_steps", train.trace_steps, "steps the trace covers, \"A:B\" (1-based, inclusive); \"\": all"),
    FLOAT_KEY("train.sample_every_s", train.sample_every_s,
              "seconds between every rank's resource samples (CPU, memory, threads, I/O, GPU); 0: none"),
    FLOAT_KEY("train.peak_tflops", train.peak_tflops,
              "peak TFLOP/s per rank for MFU; 0: the GPU's known dense peak (none on a CPU)"),
  };
}

// The optim.* keys.
Table optim_keys() {
  return {
    CHOICE_KEY("optim.name", optim.name, "adamw|sgd", "optimizer"),
    FLOAT_KEY("optim.beta1", optim.beta1, "AdamW's first-moment decay"),
    FLOAT_KEY("optim.beta2", optim.beta2, "AdamW's second-moment decay"),
    FLOAT_KEY("optim.eps", optim.eps, "AdamW's epsilon"),
    FLOAT_KEY("optim.weight_decay", optim.weight_decay, "decoupled weight decay"),
    FLOAT_KEY("optim.momentum", optim.momentum, "SGD's momentum"),
    FLOAT_KEY("optim.grad_clip", optim.grad_clip, "largest global gradient norm; 0: no clipping"),
    CHOICE_KEY("optim.schedule", optim.schedule, "constant|cosine|linear", "learning-rate schedule after the warm-up"),
    INT_KEY("optim.warmup_steps", optim.warmup_steps, 0, kMaxSteps, "steps of linear warm-up from 0 to train.lr"),
    FLOAT_KEY("optim.min_lr_ratio", optim.min_lr_ratio, "floor of the cosine or linear decay, as a fraction of train.lr"),
  };
}

// The run's own keys; the model's (model.*) are its kind's (models/registry), merged in below.
const Table& run_keys() {
  static const Table k = [] {
    Table t = data_and_batch_keys();
    t.merge(parallel_keys());
    t.merge(train_keys());
    t.merge(optim_keys());
    return t;
  }();
  return k;
}

// Edit distance (insertions, deletions, substitutions) between two keys, for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Every key: the run's, model.kind, and every model kind's.
const std::vector<std::string>& all_keys() {
  static const std::vector<std::string> names = [] {
    std::set<std::string> n{"model.kind"};
    for (const auto& [k, _] : run_keys()) n.insert(k);
    for (const ModelKind* kind : model_kinds())
      for (const std::string& k : kind->keys()) n.insert("model." + k);
    return std::vector<std::string>(n.begin(), n.end());
  }();
  return names;
}

bool has_key(const ModelKind& k, const std::string& name) {
  const std::vector<std::string> keys = k.keys();
  return std::find(keys.begin(), keys.end(), name) != keys.end();
}

bool some_kind_has(const std::string& name) {
  for (const ModelKind* k : model_kinds())
    if (has_key(*k, name)) return true;
  return false;
}

// The known key nearest to a misspelt one ("" when none is close): by the whole key, or by its name
// alone when the section is missing or wrong (`lr`, `model.lr`).
std::string nearest_key(const std::string& key) {
  const std::string name = key.substr(key.find('.') + 1);
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 4) + 1;
  for (const std::string& k : all_keys()) {
    const size_t d = std::min(edit_distance(key, k), edit_distance(name, k.substr(k.find('.') + 1)) + 1);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

}  // namespace

std::vector<std::string> RunConfig::known_keys() { return all_keys(); }

std::string RunConfig::describe_keys() {
  const RunConfig defaults;
  std::string out, model = describe_config_key("model.kind", defaults.model.kind, [] {
    std::string kinds;
    for (const ModelKind* k : model_kinds()) kinds += (kinds.empty() ? "" : "|") + k->name();
    return kinds;
  }(), 0, 0, "the model (docs/extending.md adds one); the model.* keys below are each kind's");
  for (const ModelKind* k : model_kinds())
    model += "  model.kind = " + k->name() + ": " + k->about() + "\n" + k->describe_keys();
  bool model_said = false;
  for (const auto& [k, key] : run_keys()) {
    if (!model_said && k > "model.") {
      out += model;
      model_said = true;
    }
    out += describe_config_key(k, key.get(defaults), key.type, key.lo, key.hi, key.help);
  }
  return out;
}

void RunConfig::set(const std::string& key_given, const std::string& value, const std::string& origin) {
  const std::string key = key_given == "device" ? "train.device" : key_given;  // `--set device=cuda`
  auto it = run_keys().find(key);
  const bool model_key = key.rfind("model.", 0) == 0;
  const bool kind_key = model_key && key != "model.kind" && some_kind_has(key.substr(6));
  require(key != "parallel.pp_timeline", "parallel.pp_timeline (" + origin +
                                          ") is now train.trace = true: it writes RUN/trace.json, the pipeline's "
                                          "actions with every rank's phases, units and collectives");
  if (it == run_keys().end() && key != "model.kind" && !kind_key) {
    const std::string near = nearest_key(key);
    std::string section = key.substr(0, key.find('.') + 1), same;
    for (const std::string& k : all_keys())
      if (k.rfind(section, 0) == 0) same += (same.empty() ? "" : ", ") + k;
    throw Error("unknown config key '" + key + "' (" + origin + "): " +
                (!near.empty() ? "did you mean " + near + "? (`dtrain config keys` lists every key)"
                 : same.empty() ? "sections are model, data, train, optim, parallel (`dtrain config keys` lists every key)"
                                : "known keys here: " + same + " (`dtrain config keys` lists every key)"));
  }
  try {
    (void)Json(value).dump();  // values are written into config.json and checkpoints: JSON text is UTF-8
  } catch (const Json::type_error&) {
    throw Error(key + " (" + origin + ") is not valid UTF-8 text: give it in UTF-8 (a path in another " +
                "encoding: rename it, or link to it from a UTF-8 name)");
  }
  if (key == "model.kind") {
    std::string known;
    for (const ModelKind* k : model_kinds()) known += (known.empty() ? "" : "|") + k->name();
    model.kind = parse_config_choice(key, value, origin, known);
    model.values = Json::object();  // the values given so far, read by this kind's table
    const ModelKind& kind = kind_of(model);
    for (const GivenValue& g : model_given)
      if (has_key(kind, g.name)) model.values[g.name] = kind.parse(g.name, g.text, g.origin);
    return;
  }
  if (kind_key) {
    const std::string name = key.substr(6);
    const ModelKind& kind = kind_of(model);
    Json parsed;  // null: deferred (another kind's key, or a value only another kind takes)
    if (has_key(kind, name)) {
      try {
        parsed = kind.parse(name, value, origin);
      } catch (const Error&) {
        // a value this kind refuses may be another kind's, whose model.kind comes later (TOML reads a
        // table's keys in order): validate() reads it again by the final kind
        bool another_takes_it = false;
        for (const ModelKind* other : model_kinds()) {
          if (other == &kind || !has_key(*other, name)) continue;
          try {
            other->parse(name, value, origin);
            another_takes_it = true;
          } catch (const Error&) {
          }
        }
        if (!another_takes_it) throw;  // no kind takes it: refused at once
      }
    }
    std::erase_if(model_given, [&](const GivenValue& g) { return g.name == name; });
    model_given.push_back({name, value, origin});
    if (parsed.is_null())
      model.values.erase(name);  // validate() names it unless model.kind changes
    else
      model.values[name] = parsed;
    return;
  }
  try {
    it->second.set(*this, value);
  } catch (const Error& e) {
    std::string msg = e.what();
    auto p = msg.find("(--set)");
    if (p != std::string::npos) msg.replace(p, 7, "(" + origin + ")");
    throw Error(msg);
  }
}

std::unique_ptr<DataSource> open_run_data(const DataConfig& data, InputKind input, bool log) {
  auto staged = [&](const std::string& dir) {
    if (data.stage.empty()) return dir;
    const StageResult r = stage_data(dir, data.stage);
    if (log)
      std::printf("data %s %s %s (%.1f MiB, %lld files) in %.1f s\n", dir.c_str(),
                  r.copied ? "staged to" : "already staged at", r.dir.c_str(), double(r.bytes) / (1 << 20),
                  (long long)r.files, r.seconds);
    return r.dir;
  };
  if (data.mix.empty()) return DataSource::open(staged(data.dir), input);
  std::vector<MixEntry> mix = data.mix;
  for (MixEntry& m : mix) m.dir = staged(m.dir);
  return open_mix_source(mix, input);
}

void RunConfig::load_toml(const std::string& path) {
  const std::string text = read_file(path, kMaxSmallFileBytes, "config");  // a regular file, never a pipe
  toml::table tbl;
  try {
    tbl = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    throw Error("config " + path + " is not valid TOML (line " + std::to_string(src.begin.line) + ": " +
                std::string(e.description()) + "): fix the file");
  } catch (const std::exception& e) {
    throw Error("cannot read config " + path + ": " + e.what() + "; check the path");
  }
  // model.kind first: the model's other keys are read by its kind's table
  if (const auto* m = tbl["model"].as_table())
    if (const auto* kind = (*m)["kind"].as_string()) set("model.kind", kind->get(), path);
  for (const auto& [section, node] : tbl) {
    const auto* sub = node.as_table();
    require(sub != nullptr, "config " + path + ": top-level key '" + std::string(section.str()) +
                                "' must be a table such as [train]: move it under a section");
    for (const auto& [name, val] : *sub) {
      std::string key = std::string(section.str()) + "." + std::string(name.str()), text;
      if (auto s = val.as_string()) text = s->get();
      else if (auto i = val.as_integer()) text = std::to_string(i->get());
      else if (auto f = val.as_floating_point()) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", f->get());
        text = buf;
      } else if (auto b = val.as_boolean()) text = b->get() ? "true" : "false";
      else if (auto list = val.as_array()) {  // a list (data.mix): its JSON text
        std::ostringstream json;
        json << toml::json_formatter{*list};
        text = json.str();
      }
      else throw Error("config " + path + ": " + key + " has an unsupported type: use a number, string or boolean");
      set(key, text, path);
    }
  }
}

std::vector<double> RunConfig::pp_unit_cost_list() const {
  std::vector<double> costs;
  const std::string& text = parallel.pp_unit_costs;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    require(!item.empty() && *end == 0 && std::isfinite(v) && v > 0,
            "parallel.pp_unit_costs = \"" + text + "\" is not a list of positive numbers: write one cost per unit in "
            "model order, e.g. \"0.1,3,3,3,3,2\" (a run's summary.json pp_unit_costs), or \"\" for FLOPs");
    costs.push_back(v);
    at = comma + 1;
  }
  return costs;
}

std::vector<int> RunConfig::pp_split_units() const {
  std::vector<int> units;
  std::string item;
  const std::string& text = parallel.pp_split;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != ',') {
      item += text[i];
      continue;
    }
    if (item.empty() && text.empty()) break;
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    require(!item.empty() && *end == 0 && v > 0 && v < (1 << 20),
            "parallel.pp_split = \"" + text + "\" is not a list of unit indices: write the first unit of every "
            "stage but the first, e.g. \"3,5\" (units in model order: 0 the input unit, the last the loss unit)");
    units.push_back(int(v));
    item.clear();
  }
  return units;
}

void RunConfig::validate() const {
  require(train.device == "auto" || train.device == "cpu" || train.device == "cuda" ||
              train.device.rfind("cuda:", 0) == 0,
          "train.device = \"" + train.device + "\" is unknown: use auto, cpu, cuda (one GPU per local rank) or cuda:N");
  const ModelKind& kind = kind_of(model);
  for (const GivenValue& g : model_given) {
    require(has_key(kind, g.name), "model." + g.name + " (" + g.origin + ") is not a key of model.kind = " +
                                       kind.name() +
                                       ": remove it, or choose the kind it belongs to (`dtrain config keys` lists each "
                                       "kind's keys)");
    if (!model.values.contains(g.name)) kind.parse(g.name, g.text, g.origin);  // names what it refuses
  }
  kind.validate(model, false);  // the values the data gives are not known yet
  optim.validate();
  // Every whole-number key within its range (parsed values were checked already; values set in code
  // are checked here).
  for (const auto& [k, key] : run_keys())
    if (key.type == "int") require_config_range(k, key.get(*this).get<int64_t>(), key.lo, key.hi, key.help);
  for (auto [key, v] : {std::pair{"parallel.pp", parallel.pp}, {"parallel.dp_replicate", parallel.dp_replicate},
                        {"parallel.dp_shard", parallel.dp_shard}, {"parallel.tp", parallel.tp}})
    require(v != 0, std::string(key) + " = 0 is not a mesh size: give 1 or more, or -1 for what the world leaves");
  require(parallel.dp == 0 || parallel.dp_replicate == -1 || parallel.dp == parallel.dp_replicate,
          "parallel.dp = " + std::to_string(parallel.dp) + " and parallel.dp_replicate = " +
              std::to_string(parallel.dp_replicate) + " disagree: parallel.dp is plain DDP's name for dp_replicate; set one");
  require(parallel.fsdp_reduce_dtype == "f32" || train.precision == "bf16",
          "parallel.fsdp_reduce_dtype = bf16 needs train.precision = bf16: set both, or reduce in f32");
  require(parallel.bucket_mb >= 0 && parallel.bucket_mb <= (1 << 20),
          "parallel.bucket_mb = " + std::to_string(parallel.bucket_mb) + " is outside 0..1048576 MB: give the DDP bucket "
          "size (25 is PyTorch's default), or 0 for an eighth of the model's gradients within 1 to 25 MB");
  pp_split_units();  // names a malformed list
  pp_unit_cost_list();
  train.trace_range();  // names a malformed range
  require(train.sample_every_s == 0 || (train.sample_every_s >= 0.1 && train.sample_every_s <= 86400),
          "train.sample_every_s = " + std::to_string(train.sample_every_s) +
              " is outside 0.1..86400 seconds: give the seconds between resource samples, or 0 for none");
  require(train.stop_before >= 0 && train.stop_before <= 10080,
          "train.stop_before = " + std::to_string(train.stop_before) +
              " is outside 0..10080 minutes: give the minutes before the job's end to save and stop at, or 0");
  require(train.peak_tflops >= 0 && train.peak_tflops < 1e7,
          "train.peak_tflops = " + std::to_string(train.peak_tflops) +
              " is not a peak: give the device's TFLOP/s per rank (989 for an H100's dense bf16), or 0");
  require(train.epochs > 0 || train.max_steps > 0,
          "train.epochs and train.max_steps are both 0: set at least one of them");
  require_thread_count(train.threads, "train.threads");
  // Far past any memory, and keeps the sizes planned from it (rows × width × bytes) within 64 bits.
  const int64_t kMaxRows = (int64_t(1) << 31) - 1, rows = kind.sample_shape(model).targets;
  require(rows <= 0 || train.batch_size <= kMaxRows / rows,
          "train.batch_size = " + std::to_string(train.batch_size) + " makes batches of more than 2^31 rows (× " +
              std::to_string(rows) + " rows per sample): lower train.batch_size");
  require(train.global_batch == 0 || train.grad_accum == 1,
          "train.global_batch = " + std::to_string(train.global_batch) + " and train.grad_accum = " +
              std::to_string(train.grad_accum) + " both set the micro-steps: keep train.global_batch (the micro-steps "
              "follow from it and train.batch_size) and drop train.grad_accum");
  require(!train.checkpoint_async || train.checkpoint_format != "full",
          "train.checkpoint_async = true writes sharded checkpoints in the background; the full format is written "
          "by rank 0 while the units are gathered: set train.checkpoint_format=sharded (or auto), or turn async off");
}

Json RunConfig::to_json() const {
  Json out = Json::object();
  for (const auto& [k, key] : run_keys()) {
    auto dot = k.find('.');
    std::string section = k.substr(0, dot), name = k.substr(dot + 1);
    if (!out.contains(section)) out[section] = Json::object();
    out[section][name] = key.get(*this);
  }
  out["model"] = model_to_json(model);
  return out;
}

void RunConfig::apply_json(const Json& j, const std::string& path) {
  require(j.is_object(), path + " is a JSON " + j.type_name() + ", expected {\"train\": {...}, ...}; fix the JSON text");
  for (const auto& [section, obj] : j.items()) {
    require(obj.is_object(), path + ": \"" + section + "\" is a JSON " + obj.type_name() +
                                 ", expected an object of keys; fix the JSON text");
    for (const auto& [name, v] : obj.items()) set(section + "." + name, json_config_text(v), path);
  }
}

}  // namespace dtrain

namespace dtrain {

std::pair<int64_t, int64_t> TrainConfig::trace_range() const {
  if (trace_steps.empty()) return {1, 0};
  const size_t colon = trace_steps.find(':');
  auto whole = [&](const std::string& t) -> int64_t {
    if (t.empty() || t.size() > 12 || t.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoll(t);
  };
  const int64_t a = colon == std::string::npos ? -1 : whole(trace_steps.substr(0, colon));
  const int64_t b = colon == std::string::npos ? -1 : whole(trace_steps.substr(colon + 1));
  require(a >= 1 && b >= a, "train.trace_steps = \"" + trace_steps +
                                "\" is not a range of steps: give \"A:B\" with 1 <= A <= B (e.g. \"10:12\"), or \"\" for all");
  return {a, b};
}

Precision parse_precision(const std::string& text, const std::string& what) {
  require(text == "f32" || text == "bf16", what + " " + text + ": use f32 or bf16");
  return text == "bf16" ? Precision::bf16 : Precision::f32;
}

Precision TrainConfig::compute_precision() const { return parse_precision(precision, "train.precision ="); }

Recompute TrainConfig::recompute_mode() const {
  return recompute == "full" ? Recompute::full : recompute == "selective" ? Recompute::selective : Recompute::none;
}

}  // namespace dtrain
