// Checkpoint folders (see checkpoint.hpp).
#include "train/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "ckpt/safetensors.hpp"
#include "train/config.hpp"

namespace fs = std::filesystem;

namespace dtrain {

Json TrainerState::to_json() const {
  Json j = Json::object();
  j["global_step"] = global_step;
  j["epoch"] = epoch;
  j["batch_in_epoch"] = batch_in_epoch;
  j["epoch_loss_sum"] = epoch_loss_sum;
  j["best_val"] = std::isfinite(best_val) ? Json(best_val) : Json(nullptr);
  j["train_seconds"] = train_seconds;
  j["train_tokens"] = train_tokens;
  j["data_parallel"] = data_parallel;
  j["global_batch"] = global_batch;
  j["logs"] = {{"metrics_bytes", logs.metrics_bytes}, {"events_file", logs.events_file},
               {"events_bytes", logs.events_bytes}};
  return j;
}

TrainerState TrainerState::from_json(const Json& j, const std::string& source) {
  TrainerState s;
  s.global_step = json_get<int64_t>(j, "global_step", source);
  s.epoch = json_get<int64_t>(j, "epoch", source);
  s.batch_in_epoch = json_get<int64_t>(j, "batch_in_epoch", source);
  s.epoch_loss_sum = json_get<double>(j, "epoch_loss_sum", source);
  s.best_val = json_at(j, "best_val", source).is_null() ? std::numeric_limits<double>::infinity()
                                                        : json_get<double>(j, "best_val", source);
  s.train_seconds = json_get<double>(j, "train_seconds", source);
  s.train_tokens = json_get<int64_t>(j, "train_tokens", source);
  if (j.contains("logs")) {  // checkpoints before these fields leave them unknown
    s.data_parallel = json_get<int64_t>(j, "data_parallel", source);
    s.global_batch = json_get<int64_t>(j, "global_batch", source);
    s.logs.metrics_bytes = json_get<int64_t>(j, "logs.metrics_bytes", source);
    s.logs.events_file = json_get<std::string>(j, "logs.events_file", source);
    s.logs.events_bytes = json_get<int64_t>(j, "logs.events_bytes", source);
  }
  return s;
}

std::vector<SafeTensorView> weight_views(TransformerLM& model) {
  std::vector<SafeTensorView> v;
  float* host = model.host_params();
  for (Unit* u : model.units())
    for (size_t i = 0; i < u->params().size(); ++i) {
      const ParamInfo& p = u->params()[i];
      v.push_back({p.name, DType::f32, p.shape, host + model.offset_of(*u) + p.offset});
    }
  return v;
}

namespace {

std::string describe_difference(const ModelConfig& a, const ModelConfig& b) {
  Json ja = model_to_json(a), jb = model_to_json(b);
  for (const auto& [k, v] : ja.items())
    if (!(jb.at(k) == v)) return "model." + k + " " + v.dump() + " vs " + jb.at(k).dump();
  return "";
}

}  // namespace

void remove_leftovers_of(const std::string& dir_path) {
  const fs::path dir(dir_path);
  const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  const std::string stem = dir.filename().string() + ".";
  std::vector<fs::path> doomed;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec))
    if (e.path().filename().string().rfind(stem, 0) == 0) doomed.push_back(e.path());
  for (const fs::path& p : doomed) fs::remove_all(p, ec);
}

void require_same_model(const std::string& dir, const ModelConfig& config) {
  const std::string diff = describe_difference(checkpoint_model_config(dir), config);
  require(diff.empty(), "checkpoint " + dir + " was written for a different model (" + diff +
                            "): use the config it was trained with, or start a new run dir");
}

void write_checkpoint_extras(const std::string& staged, const TrainerState* state, const Json& run_config,
                             const std::string& vocab_path) {
  if (state) {
    Json t = state->to_json();
    t["config"] = run_config;
    write_file_atomic(staged + "/trainer.json", t.dump(2));
  }
  if (!vocab_path.empty()) write_file_atomic(staged + "/vocab.txt", read_file(vocab_path));
}

std::map<std::string, std::string> weights_metadata(const ModelConfig& config) {
  return {{"format", "dtrain-checkpoint-1"}, {"dtrain.model", model_to_json(config).dump()}};
}

void save_checkpoint(const std::string& dir, TransformerLM& model, Optimizer* opt, const TrainerState* state,
                     const Json& run_config, const std::string& vocab_path) {
  const std::string staged = dir + ".staging." + std::to_string(::getpid());
  remove_leftovers_of(dir);
  fs::create_directories(staged);
  write_safetensors(staged + "/model.safetensors", weight_views(model), weights_metadata(model.config()));
  if (opt) {
    std::vector<SafeTensorView> v;
    for (const auto& s : opt->state()) v.push_back({s.name, DType::f32, {s.numel}, s.data});
    write_safetensors(staged + "/optimizer.safetensors", v,
                      {{"optimizer", opt->config().name}, {"steps", std::to_string(opt->steps_taken())}});
  }
  write_checkpoint_extras(staged, state, run_config, vocab_path);
  fs::create_directories(fs::path(dir).parent_path().empty() ? fs::path(".") : fs::path(dir).parent_path());
  replace_dir_atomic(staged, dir);
}

ModelConfig checkpoint_model_config(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  require(fs::exists(path), "checkpoint " + dir + " has no model.safetensors: point at a checkpoint folder "
                            "(e.g. RUN/model_best or RUN/checkpoints/step_…)");
  SafetensorsFile f(path);
  auto it = f.metadata().find("dtrain.model");
  require(it != f.metadata().end(),
          path + " has no dtrain.model metadata: it was not written by dtrain; use a dtrain checkpoint");
  const std::string source = "the dtrain.model metadata of " + path;
  return model_from_json(parse_json(it->second, source), source);
}

void load_checkpoint(const std::string& dir, TransformerLM& model, Optimizer* opt, TrainerState* state) {
  require_same_model(dir, model.config());
  SafetensorsFile f(dir + "/model.safetensors");
  for (const auto& v : weight_views(model)) f.read_into(v.name, DType::f32, v.shape, const_cast<void*>(v.data));
  model.upload_host_params();
  if (opt) {
    const std::string path = dir + "/optimizer.safetensors";
    require(!fs::exists(dir + "/shards"),
            "checkpoint " + dir + " holds its optimizer state as FSDP shards: resume it with parallel.dp_shard = " +
                "the shard count it was written with (the number in its shards/ file names)");
    require(fs::exists(path), "checkpoint " + dir + " has no optimizer state: resume from a full "
                              "checkpoint under RUN/checkpoints, not from model_best/model_final");
    SafetensorsFile o(path);
    require(o.metadata().count("optimizer") && o.metadata().at("optimizer") == opt->config().name,
            path + " holds state of another optimizer: resume with the same optim.name");
    for (const auto& s : opt->state()) o.read_into(s.name, DType::f32, {s.numel}, s.data);
    opt->upload_state();
    opt->set_steps_taken(std::stoll(o.metadata().at("steps")));
  }
  if (state) {
    const std::string path = dir + "/trainer.json";
    *state = TrainerState::from_json(parse_json(read_file(path), path), path);
  }
}

std::string latest_checkpoint(const std::string& run_dir) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(root)) return "";
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step_", 0) == 0 && n.find('.') == std::string::npos &&
        fs::exists(e.path() / "trainer.json"))
      names.push_back(n);
  }
  if (names.empty()) return "";
  std::sort(names.begin(), names.end());
  return (root / names.back()).string();
}

void prune_checkpoints(const std::string& run_dir, int64_t keep) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(root)) return;
  std::vector<fs::path> complete, leftovers;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory() || n.rfind("step_", 0) != 0) continue;
    // "step_N" is a checkpoint; "step_N.staging.PID" and the like are leftovers of killed writers
    (n.find('.') == std::string::npos ? complete : leftovers).push_back(e.path());
  }
  std::sort(complete.begin(), complete.end());
  for (size_t i = 0; i + keep < complete.size(); ++i) leftovers.push_back(complete[i]);
  for (const fs::path& p : leftovers) {
    // Renamed away first, so a kill during the removal never leaves a partial "step_N" behind.
    const fs::path doomed = p.string() + ".deleting." + std::to_string(::getpid());
    std::error_code ec;
    fs::rename(p, doomed, ec);
    fs::remove_all(ec ? p : doomed, ec);
  }
}

}  // namespace dtrain
