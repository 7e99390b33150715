// RunConfig: the table of known keys with their parsers, TOML loading and validation.
#include "train/config.hpp"

#include <charconv>
#include <cstdlib>
#include <cmath>
#include <functional>
#include <map>
#include <toml++/toml.h>

#include "core/error.hpp"
#include "core/limits.hpp"

namespace dtrain {

namespace {

struct Key {
  std::string type;  // int, float, bool, string or a choice list "a|b"
  std::function<void(RunConfig&, const std::string&)> set;
  std::function<Json(const RunConfig&)> get;
};

std::string where(const std::string& key, const std::string& value, const std::string& origin) {
  return key + " = " + value + " (" + origin + ")";
}

int64_t parse_int(const std::string& k, const std::string& v, const std::string& o) {
  int64_t x = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  require(r.ec == std::errc() && r.ptr == v.data() + v.size(),
          where(k, v, o) + " is not an integer: give a whole number");
  return x;
}
double parse_float(const std::string& k, const std::string& v, const std::string& o) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  require(!v.empty() && end == v.c_str() + v.size() && std::isfinite(x),
          where(k, v, o) + " is not a number: give e.g. 0.002");
  return x;
}
bool parse_bool(const std::string& k, const std::string& v, const std::string& o) {
  require(v == "true" || v == "false", where(k, v, o) + " is not a boolean: use true or false");
  return v == "true";
}
std::string parse_choice(const std::string& k, const std::string& v, const std::string& o,
                         const std::string& choices) {
  std::string c = "|" + choices + "|";
  require(c.find("|" + v + "|") != std::string::npos,
          where(k, v, o) + " is not allowed: use one of " + choices);
  return v;
}

#define INT_KEY(name, field) \
  {name, {"int", [](RunConfig& c, const std::string& v) { c.field = parse_int(name, v, "--set"); }, \
          [](const RunConfig& c) { return Json(c.field); }}}
#define FLOAT_KEY(name, field) \
  {name, {"float", [](RunConfig& c, const std::string& v) { c.field = float(parse_float(name, v, "--set")); }, \
          [](const RunConfig& c) { return Json(c.field); }}}
#define BOOL_KEY(name, field) \
  {name, {"bool", [](RunConfig& c, const std::string& v) { c.field = parse_bool(name, v, "--set"); }, \
          [](const RunConfig& c) { return Json(c.field); }}}
#define STRING_KEY(name, field) \
  {name, {"string", [](RunConfig& c, const std::string& v) { c.field = v; }, \
          [](const RunConfig& c) { return Json(c.field); }}}
#define CHOICE_KEY(name, field, choices) \
  {name, {choices, [](RunConfig& c, const std::string& v) { c.field = parse_choice(name, v, "--set", choices); }, \
          [](const RunConfig& c) { return Json(c.field); }}}

const std::map<std::string, Key>& keys() {
  static const std::map<std::string, Key> k = {
      INT_KEY("model.vocab_size", model.vocab_size),
      INT_KEY("model.seq_len", model.seq_len),
      INT_KEY("model.dim", model.dim),
      INT_KEY("model.heads", model.heads),
      INT_KEY("model.layers", model.layers),
      INT_KEY("model.ff_dim", model.ff_dim),
      {"model.activation",
       {"relu|gelu",
        [](RunConfig& c, const std::string& v) {
          c.model.activation = parse_choice("model.activation", v, "--set", "relu|gelu") == "relu"
                                   ? Activation::relu
                                   : Activation::gelu;
        },
        [](const RunConfig& c) { return Json(c.model.activation == Activation::relu ? "relu" : "gelu"); }}},
      {"model.norm",
       {"post|pre",
        [](RunConfig& c, const std::string& v) {
          c.model.pre_norm = parse_choice("model.norm", v, "--set", "post|pre") == "pre";
        },
        [](const RunConfig& c) { return Json(c.model.pre_norm ? "pre" : "post"); }}},
      {"model.positions",
       {"sinusoidal|learned",
        [](RunConfig& c, const std::string& v) {
          c.model.learned_positions =
              parse_choice("model.positions", v, "--set", "sinusoidal|learned") == "learned";
        },
        [](const RunConfig& c) { return Json(c.model.learned_positions ? "learned" : "sinusoidal"); }}},
      BOOL_KEY("model.final_norm", model.final_norm),
      BOOL_KEY("model.tied", model.tied),
      BOOL_KEY("model.head_bias", model.head_bias),
      FLOAT_KEY("model.dropout", model.dropout),
      BOOL_KEY("model.causal", model.causal),
      FLOAT_KEY("model.ln_eps", model.ln_eps),
      STRING_KEY("data.dir", data.dir),
      INT_KEY("data.stride", data.stride),
      INT_KEY("data.eval_stride", data.eval_stride),
      BOOL_KEY("data.shuffle", data.shuffle),
      INT_KEY("train.epochs", train.epochs),
      INT_KEY("train.max_steps", train.max_steps),
      INT_KEY("train.batch_size", train.batch_size),
      INT_KEY("train.grad_accum", train.grad_accum),
      INT_KEY("parallel.dp", parallel.dp),
      INT_KEY("parallel.pp", parallel.pp),
      INT_KEY("parallel.dp_replicate", parallel.dp_replicate),
      INT_KEY("parallel.dp_shard", parallel.dp_shard),
      INT_KEY("parallel.tp", parallel.tp),
      {"parallel.bucket_mb",
       {"float", [](RunConfig& c, const std::string& v) { c.parallel.bucket_mb = parse_float("parallel.bucket_mb", v, "--set"); },
        [](const RunConfig& c) { return Json(c.parallel.bucket_mb); }}},
      INT_KEY("parallel.timeout_s", parallel.timeout_s),
      INT_KEY("parallel.fsdp_prefetch", parallel.fsdp_prefetch),
      BOOL_KEY("parallel.fsdp_reshard_after_forward", parallel.fsdp_reshard_after_forward),
      BOOL_KEY("parallel.tp_sequence", parallel.tp_sequence),
      CHOICE_KEY("parallel.fsdp_reduce_dtype", parallel.fsdp_reduce_dtype, "f32|bf16"),
      CHOICE_KEY("parallel.pp_schedule", parallel.pp_schedule, "gpipe|1f1b|interleaved-1f1b|zb-h1|zb-v"),
      STRING_KEY("parallel.pp_schedule_file", parallel.pp_schedule_file),
      INT_KEY("parallel.pp_virtual", parallel.pp_virtual),
      INT_KEY("parallel.microbatches", parallel.microbatches),
      STRING_KEY("parallel.pp_split", parallel.pp_split),
      BOOL_KEY("parallel.pp_timeline", parallel.pp_timeline),
      {"train.seed",
       {"int", [](RunConfig& c, const std::string& v) { c.train.seed = uint64_t(parse_int("train.seed", v, "--set")); },
        [](const RunConfig& c) { return Json(c.train.seed); }}},
      {"train.threads",
       {"int", [](RunConfig& c, const std::string& v) { c.train.threads = int(parse_int("train.threads", v, "--set")); },
        [](const RunConfig& c) { return Json(c.train.threads); }}},
      CHOICE_KEY("train.precision", train.precision, "f32|bf16"),
      STRING_KEY("train.device", train.device),
      FLOAT_KEY("train.lr", optim.lr),
      INT_KEY("train.eval_every", train.eval_every),
      INT_KEY("train.eval_max_batches", train.eval_max_batches),
      INT_KEY("train.checkpoint_every", train.checkpoint_every),
      INT_KEY("train.keep_checkpoints", train.keep_checkpoints),
      CHOICE_KEY("train.checkpoint_format", train.checkpoint_format, "auto|full|sharded"),
      BOOL_KEY("train.checkpoint_async", train.checkpoint_async),
      STRING_KEY("train.init_from", train.init_from),
      INT_KEY("train.log_every", train.log_every),
      BOOL_KEY("train.progress", train.progress),
      CHOICE_KEY("optim.name", optim.name, "adamw|sgd"),
      FLOAT_KEY("optim.beta1", optim.beta1),
      FLOAT_KEY("optim.beta2", optim.beta2),
      FLOAT_KEY("optim.eps", optim.eps),
      FLOAT_KEY("optim.weight_decay", optim.weight_decay),
      FLOAT_KEY("optim.momentum", optim.momentum),
      FLOAT_KEY("optim.grad_clip", optim.grad_clip),
      CHOICE_KEY("optim.schedule", optim.schedule, "constant|cosine|linear"),
      INT_KEY("optim.warmup_steps", optim.warmup_steps),
      FLOAT_KEY("optim.min_lr_ratio", optim.min_lr_ratio),
  };
  return k;
}

}  // namespace

std::vector<std::string> RunConfig::known_keys() {
  std::vector<std::string> out;
  for (const auto& [k, _] : keys()) out.push_back(k);
  return out;
}

void RunConfig::set(const std::string& key_given, const std::string& value, const std::string& origin) {
  const std::string key = key_given == "device" ? "train.device" : key_given;  // `--set device=cuda`
  auto it = keys().find(key);
  if (it == keys().end()) {
    std::string section = key.substr(0, key.find('.') + 1), same;
    for (const auto& [k, _] : keys())
      if (k.rfind(section, 0) == 0) same += (same.empty() ? "" : ", ") + k;
    throw Error("unknown config key '" + key + "' (" + origin + "): " +
                (same.empty() ? "sections are model, data, train, optim, parallel" : "known keys here: " + same));
  }
  try {
    (void)Json(value).dump();  // values are written into config.json and checkpoints: JSON text is UTF-8
  } catch (const Json::type_error&) {
    throw Error(key + " (" + origin + ") is not valid UTF-8 text: give it in UTF-8 (a path in another " +
                "encoding: rename it, or link to it from a UTF-8 name)");
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

void RunConfig::load_toml(const std::string& path) {
  toml::table tbl;
  try {
    tbl = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    throw Error("config " + path + " is not valid TOML (line " + std::to_string(src.begin.line) + ": " +
                std::string(e.description()) + "): fix the file");
  } catch (const std::exception& e) {
    throw Error("cannot read config " + path + ": " + e.what() + "; check the path");
  }
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
      else throw Error("config " + path + ": " + key + " has an unsupported type: use a number, string or boolean");
      set(key, text, path);
    }
  }
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
            "stage but the first, e.g. \"3,5\" (0 is the embedding, 1..layers the blocks, layers+1 the head)");
    units.push_back(int(v));
    item.clear();
  }
  return units;
}

void RunConfig::validate() const {
  require(train.device == "cpu" || train.device == "cuda" || train.device.rfind("cuda:", 0) == 0,
          "train.device = \"" + train.device + "\" is unknown: use cpu, cuda (one GPU per local rank) or cuda:N");
  ModelConfig m = model;
  if (m.vocab_size == 0) m.vocab_size = 1;  // comes from the data
  m.validate();
  optim.validate();
  auto positive = [](const char* key, int64_t v) {
    require(v > 0, std::string(key) + " = " + std::to_string(v) + " must be positive: use --set " + key + "=N");
  };
  positive("train.batch_size", train.batch_size);
  positive("data.stride", data.stride);
  positive("train.grad_accum", train.grad_accum);
  positive("parallel.timeout_s", parallel.timeout_s);
  require(parallel.dp >= 0, "parallel.dp must not be negative: use 0 for the world size");
  for (auto [key, v] : {std::pair{"parallel.pp", parallel.pp}, {"parallel.dp_replicate", parallel.dp_replicate},
                        {"parallel.dp_shard", parallel.dp_shard}, {"parallel.tp", parallel.tp}})
    require(v == -1 || (v >= 1 && v <= (1 << 20)), std::string(key) + " = " + std::to_string(v) +
                                                        " is not a mesh size: give 1 or more, or -1 for what the world leaves");
  require(parallel.dp == 0 || parallel.dp_replicate == -1 || parallel.dp == parallel.dp_replicate,
          "parallel.dp = " + std::to_string(parallel.dp) + " and parallel.dp_replicate = " +
              std::to_string(parallel.dp_replicate) + " disagree: parallel.dp is plain DDP's name for dp_replicate; set one");
  require(parallel.fsdp_prefetch >= 0 && parallel.fsdp_prefetch <= 64,
          "parallel.fsdp_prefetch = " + std::to_string(parallel.fsdp_prefetch) +
              " is out of range: give the number of units to gather ahead, 0 to 64 (1 is the default)");
  require(parallel.fsdp_reduce_dtype == "f32" || train.precision == "bf16",
          "parallel.fsdp_reduce_dtype = bf16 needs train.precision = bf16: set both, or reduce in f32");
  require(parallel.bucket_mb > 0, "parallel.bucket_mb must be positive (25 is PyTorch's default)");
  require(parallel.pp_virtual >= 1 && parallel.pp_virtual <= 64,
          "parallel.pp_virtual = " + std::to_string(parallel.pp_virtual) +
              " is out of range: give the stages per pipeline rank, 1 to 64 (2 for interleaved-1f1b and zb-v)");
  require(parallel.microbatches >= 0 && parallel.microbatches <= 4096,
          "parallel.microbatches = " + std::to_string(parallel.microbatches) +
              " is out of range: give the micro-batches per pass (0: as many as pipeline ranks)");
  pp_split_units();  // names a malformed list
  require(train.epochs > 0 || train.max_steps > 0,
          "train.epochs and train.max_steps are both 0: set at least one of them");
  require(train.epochs >= 0 && train.max_steps >= 0, "train.epochs and train.max_steps must not be negative");
  require_thread_count(train.threads, "train.threads");
  require(data.eval_stride >= 0, "data.eval_stride must not be negative: use 0 for seq_len");
  require(train.log_every > 0, "train.log_every must be positive");
  auto not_negative = [](const char* key, int64_t v, const char* zero) {
    require(v >= 0, std::string(key) + " = " + std::to_string(v) + " must not be negative: use 0 for " + zero +
                        " or a positive number of steps");
  };
  not_negative("train.checkpoint_every", train.checkpoint_every, "checkpoints at epoch ends only");
  not_negative("train.eval_every", train.eval_every, "evaluations at epoch ends only");
  not_negative("train.eval_max_batches", train.eval_max_batches, "the whole validation split");
  // Far past any memory, and keeps the sizes planned from it (rows × width × bytes) within 64 bits.
  const int64_t kMaxRows = (int64_t(1) << 31) - 1;
  require(model.seq_len <= 0 || train.batch_size <= kMaxRows / model.seq_len,
          "train.batch_size = " + std::to_string(train.batch_size) + " makes batches of more than 2^31 tokens (× " +
              "model.seq_len " + std::to_string(model.seq_len) + "): lower train.batch_size");
  require(train.keep_checkpoints > 0, "train.keep_checkpoints must be at least 1");
  require(!train.checkpoint_async || train.checkpoint_format != "full",
          "train.checkpoint_async = true writes sharded checkpoints in the background; the full format is written "
          "by rank 0 while the units are gathered: set train.checkpoint_format=sharded (or auto), or turn async off");
}

Json RunConfig::to_json() const {
  Json out = Json::object();
  for (const auto& [k, key] : keys()) {
    auto dot = k.find('.');
    std::string section = k.substr(0, dot), name = k.substr(dot + 1);
    if (!out.contains(section)) out[section] = Json::object();
    out[section][name] = key.get(*this);
  }
  return out;
}

Json model_to_json(const ModelConfig& m) {
  RunConfig c;
  c.model = m;
  return c.to_json()["model"];
}

std::string json_config_text(const Json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();  // true/false dump as the text set() takes
}

ModelConfig model_from_json(const Json& j, const std::string& source) {
  require(j.is_object(), source + " is a JSON " + j.type_name() +
                             ", expected an object such as {\"dim\": 128}; use a dtrain checkpoint");
  RunConfig c;
  for (const auto& [name, v] : j.items()) c.set("model." + name, json_config_text(v), source);
  return c.model;
}

}  // namespace dtrain
