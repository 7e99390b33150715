// Checkpoint folders: reading and housekeeping (see checkpoint.hpp).
#include "train/checkpoint/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>

#include "ckpt/chunk_io.hpp"
#include "core/atomic_file.hpp"
#include "models/registry.hpp"
#include "train/config.hpp"

namespace fs = std::filesystem;

namespace dtrain {

Json TrainerState::to_json() const {
  Json j = Json::object();
  j["global_step"] = global_step;
  j["epoch"] = epoch;
  j["batch_in_epoch"] = batch_in_epoch;
  j["samples_in_epoch"] = samples_in_epoch;
  j["epoch_loss_sum"] = epoch_loss_sum;
  j["best_val"] = std::isfinite(best_val) ? Json(best_val) : Json(nullptr);
  j["train_seconds"] = train_seconds;
  j["train_tokens"] = train_tokens;
  j["data_parallel"] = data_parallel;
  j["global_batch"] = global_batch;
  j["logs"] = {{"metrics_bytes", logs.metrics_bytes}, {"events_file", logs.events_file},
               {"events_bytes", logs.events_bytes}};
  if (!data_sources.empty()) j["data_sources"] = data_sources;
  return j;
}

TrainerState TrainerState::from_json(const Json& j, const std::string& source) {
  TrainerState s;
  s.global_step = json_get<int64_t>(j, "global_step", source);
  s.epoch = json_get<int64_t>(j, "epoch", source);
  s.batch_in_epoch = json_get<int64_t>(j, "batch_in_epoch", source);
  s.samples_in_epoch = json_get<int64_t>(j, "samples_in_epoch", source);
  s.epoch_loss_sum = json_get<double>(j, "epoch_loss_sum", source);
  s.best_val = json_at(j, "best_val", source).is_null() ? std::numeric_limits<double>::infinity()
                                                        : json_get<double>(j, "best_val", source);
  s.train_seconds = json_get<double>(j, "train_seconds", source);
  s.train_tokens = json_get<int64_t>(j, "train_tokens", source);
  s.data_parallel = json_get<int64_t>(j, "data_parallel", source);
  s.global_batch = json_get<int64_t>(j, "global_batch", source);
  s.logs.metrics_bytes = json_get<int64_t>(j, "logs.metrics_bytes", source);
  s.logs.events_file = json_get<std::string>(j, "logs.events_file", source);
  s.logs.events_bytes = json_get<int64_t>(j, "logs.events_bytes", source);
  return s;
}

std::vector<SafeTensorView> weight_views(Model& model) {
  std::vector<SafeTensorView> v;
  float* host = model.host_params();
  for (Unit* u : model.units())
    for (const ParamInfo& p : u->params())
      v.push_back({p.name, DType::f32, p.shape, host + model.offset_of(*u) + p.offset});
  return v;
}

std::map<std::string, std::string> weights_metadata(const ModelConfig& config) {
  return {{"format", kCheckpointFormat}, {"dtrain.model", model_to_json(config).dump()}};
}

namespace {

std::string describe_difference(const ModelConfig& a, const ModelConfig& b) {
  if (a.kind != b.kind) return "model.kind " + a.kind + " vs " + b.kind;
  Json ja = model_to_json(a), jb = model_to_json(b);
  for (const auto& [k, v] : ja.items())  // dropout is how it is trained, not what the weights mean
    if (k != "dropout" && !(jb.at(k) == v)) return "model." + k + " " + v.dump() + " vs " + jb.at(k).dump();
  return "";
}

ModelConfig model_of(const std::string& dir, const CheckpointIndex& index) {
  const std::string source = dir + "/index.json";
  try {
    return model_from_json(json_at(index.meta, "model", source), source);
  } catch (const Error& e) {
    throw CheckpointDamaged(e.what());
  }
}


}  // namespace

std::string read_checkpoint_file(const std::string& dir, const std::string& name) {
  return read_indexed_file(dir, CheckpointIndex::read(dir), name);
}

ModelConfig checkpoint_model_config(const std::string& dir) {
  require(fs::is_directory(dir), "checkpoint " + dir + " is not a folder: point at a checkpoint folder "
                                 "(e.g. RUN/model_best or RUN/checkpoints/step_…)");
  return model_of(dir, CheckpointIndex::read(dir));
}

void require_same_model(const std::string& dir, const CheckpointIndex& index, const ModelConfig& config) {
  const std::string diff = describe_difference(model_of(dir, index), config);
  require(diff.empty(), "checkpoint " + dir + " was written for a different model (" + diff +
                            "): use the config it was trained with, or start a new run dir");
}

void require_same_data(const std::string& dir, const DataSource& data, const std::string& use) {
  const std::string kept = data.kept_file().name;
  const CheckpointIndex index = CheckpointIndex::read(dir);
  const auto it = index.files.find(kept);
  if (it == index.files.end() || !it->second.has_crc) return;
  const std::string bytes = read_indexed_file(dir, index, kept);  // checked against the index
  const std::string unlike = data.unlike_kept(bytes, dir + "/" + kept);
  require(unlike.empty(), "checkpoint " + dir + " was trained with " + unlike + ": to " + use + " it, use the data "
                          "it was trained on (its data.dir), or data prepared alike");
}

RecordedTensors recorded_tensors(const std::string& dir, const CheckpointIndex& index) {
  RecordedTensors out;
  const ModelConfig mc = model_of(dir, index);
  const std::string at = dir + "/index.json";
  std::map<std::string, std::vector<int64_t>> params;
  const UnitList units = kind_of(mc).units(mc, cpu_device());  // declared only: nothing planned
  for (const auto& m : units.modules)
    for (const Unit* u : m->units())
      for (const ParamInfo& p : u->params()) {
      out.tensors.emplace_back(p.name, p.global_shape);
      params[p.name] = p.global_shape;
    }
  const bool with_state = index.meta.contains("optimizer") && !index.meta["optimizer"].is_null();
  std::map<std::string, size_t> per_family;  // state tensors listed per family
  for (const auto& [name, t] : index.tensors) {
    if (name.rfind("optimizer.", 0) != 0) {
      if (!params.count(name)) out.problems.push_back(at + " lists " + name + ", which the model it records does not have");
      continue;
    }
    const size_t dot = name.find('.', 10);  // optimizer.FAMILY.PARAM
    const auto param = dot == std::string::npos ? params.end() : params.find(name.substr(dot + 1));
    if (!with_state || param == params.end()) {
      out.problems.push_back(at + " lists " + name + ", the state of no parameter of the model and optimizer it records");
      continue;
    }
    out.tensors.emplace_back(name, param->second);
    ++per_family[name.substr(10, dot - 10)];
  }
  if (with_state && per_family.empty()) out.problems.push_back(at + " records an optimizer but lists none of its state");
  for (const auto& [family, n] : per_family)
    if (n != params.size())
      out.problems.push_back(at + " lists optimizer." + family + " state for " + std::to_string(n) + " of the model's " +
                             std::to_string(params.size()) + " parameters");
  for (const auto& [name, shape] : out.tensors) {
    auto it = index.tensors.find(name);
    if (it == index.tensors.end())
      out.problems.push_back(at + " lists no tensor " + name + ", which the model it records has");
    else if (it->second.shape != shape || it->second.dtype != DType::f32)
      out.problems.push_back(at + " records " + name + " as " + dtype_name(it->second.dtype) + " " +
                             shape_str(it->second.shape) + ", but the model it records has F32 " + shape_str(shape));
  }
  for (std::string& p : out.problems) p += ": the index is damaged";
  return out;
}

LoadReport load_checkpoint(const std::string& dir, const ModelConfig& config, RankState& held, Optimizer* opt,
                           TrainerState* state) {
  const auto t0 = std::chrono::steady_clock::now();
  const CheckpointIndex index = CheckpointIndex::read(dir);
  require_same_model(dir, index, config);
  LoadReport rep;
  const std::string source = dir + "/index.json";
  if (opt) {
    const Json& o = index.meta.contains("optimizer") ? index.meta["optimizer"] : Json();
    require(o.is_object(), "checkpoint " + dir + " holds weights only: resume from a checkpoint under "
                           "RUN/checkpoints, or start from these weights with train.init_from=" + dir);
    require(json_get<std::string>(o, "name", source) == opt->config().name,
            "checkpoint " + dir + " holds the state of optimizer " + json_get<std::string>(o, "name", source) +
                ": resume with optim.name=" + json_get<std::string>(o, "name", source));
  }
  rep.bytes_read = read_chunks(dir, index, held.load_targets()).bytes_read;
  if (state) {
    const std::string text = read_indexed_file(dir, index, "trainer.json");
    const std::string path = dir + "/trainer.json";
    *state = TrainerState::from_json(parse_json(text, path), path);
  }
  held.upload();
  if (opt) opt->set_steps_taken(json_get<int64_t>(index.meta, "optimizer.steps", source));
  rep.step = index.meta.contains("step") ? json_get<int64_t>(index.meta, "step", source) : 0;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

void load_weights(const std::string& dir, const ModelConfig& config, Model& model) {
  require(fs::is_directory(dir), "checkpoint " + dir + " is not a folder: point at a checkpoint folder "
                                 "(e.g. RUN/model_best or RUN/checkpoints/step_…)");
  RankState held(model, nullptr, nullptr);
  load_checkpoint(dir, config, held, nullptr, nullptr);
}

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

std::vector<std::string> checkpoints_newest_first(const std::string& run_dir) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    // "step_N" is a checkpoint; "step_N.staging.PID" and the like are leftovers of killed writers. A
    // step_N that is a broken or looping link is a candidate too: it is named as damaged when tried.
    std::error_code type_ec;
    const bool folder = e.is_directory(type_ec) || e.is_symlink(type_ec);
    if (folder && n.rfind("step_", 0) == 0 && n.find('.') == std::string::npos) names.push_back(n);
  }
  std::sort(names.rbegin(), names.rend());
  std::vector<std::string> out;
  for (const std::string& n : names) out.push_back((root / n).string());
  return out;
}

void prune_checkpoints(const std::string& run_dir, int64_t keep) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(root)) return;
  std::vector<fs::path> complete, leftovers;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    std::error_code type_ec;
    if (!(e.is_directory(type_ec) || e.is_symlink(type_ec)) || n.rfind("step_", 0) != 0) continue;
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
