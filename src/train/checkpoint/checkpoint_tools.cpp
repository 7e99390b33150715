// dtrain ckpt (see checkpoint_tools.hpp).
#include "train/checkpoint/checkpoint_tools.hpp"

#include <cstdio>
#include <filesystem>
#include <set>

#include "ckpt/chunk_io.hpp"
#include "ckpt/safetensors.hpp"
#include "comm/world.hpp"
#include "core/atomic_file.hpp"
#include "core/output_path.hpp"
#include "models/registry.hpp"
#include "train/checkpoint/checkpoint.hpp"
#include "train/checkpoint/checkpoint_writer.hpp"
#include "train/config.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char s[32];
  std::snprintf(s, sizeof s, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return s;
}

}  // namespace

std::string inspect_checkpoint(const std::string& dir) {
  const CheckpointIndex idx = CheckpointIndex::read(dir);
  const std::string src = dir + "/index.json";
  const Json& from = json_at(idx.meta, "saved_from", src);
  std::string out = "checkpoint " + dir + "\n";
  out += "  format: " + json_get<std::string>(from, "format", src) + " (" + std::to_string(idx.files.size()) +
         " files, " + human_bytes(double(idx.data_bytes())) + " of tensor data)\n";
  out += "  saved from: " + std::to_string(json_get<int64_t>(from, "world", src)) + " ranks (pp " +
         std::to_string(json_get<int64_t>(from, "pp", src)) + " × dp_replicate " +
         std::to_string(json_get<int64_t>(from, "dp_replicate", src)) + " × dp_shard " +
         std::to_string(json_get<int64_t>(from, "dp_shard", src)) + " × tp " +
         std::to_string(json_get<int64_t>(from, "tp", src)) + ")\n";
  out += "  step: " + std::to_string(json_get<int64_t>(idx.meta, "step", src)) + "\n";
  const Json& opt = json_at(idx.meta, "optimizer", src);
  out += "  optimizer: " + (opt.is_null() ? std::string("none (weights only)")
                                          : json_get<std::string>(opt, "name", src) + ", " +
                                                std::to_string(json_get<int64_t>(opt, "steps", src)) + " steps") + "\n";
  out += "  model: " + json_at(idx.meta, "model", src).dump() + "\n";
  out += "  tensors (" + std::to_string(idx.tensors.size()) + "):\n";
  for (const auto& [name, t] : idx.tensors) {
    std::set<std::string> files;
    for (const ChunkRecord& c : t.chunks) files.insert(c.file);
    char line[512];
    std::snprintf(line, sizeof line, "    %-44s %-4s %-14s %3zu chunks in %zu files, %s\n", name.c_str(),
                  dtype_name(t.dtype), shape_str(t.shape).c_str(), t.chunks.size(), files.size(),
                  human_bytes(double(whole_box(t.shape).volume() * int64_t(dtype_size(t.dtype)))).c_str());
    out += line;
  }
  out += "  files:\n";
  for (const auto& [name, f] : idx.files) out += "    " + name + ": " + human_bytes(double(f.bytes)) + "\n";
  return out;
}

std::vector<std::string> verify_checkpoint_folder(const std::string& dir) {
  try {
    const CheckpointIndex idx = CheckpointIndex::read(dir);
    std::vector<std::string> problems = recorded_tensors(dir, idx).problems;
    for (std::string& p : verify_checkpoint(dir, idx)) problems.push_back(std::move(p));
    return problems;
  } catch (const CheckpointDamaged& e) {
    return {e.what()};
  }
}

std::string exported_config_path(const std::string& out_file) {
  fs::path p(out_file);
  if (p.extension() == ".safetensors") p.replace_extension();
  return p.string() + ".config.json";
}

void export_checkpoint(const std::string& dir, const std::string& out_file, bool optimizer) {
  check_output_file(out_file, "--out");
  check_output_file(exported_config_path(out_file), "--out (its config beside)");
  const CheckpointIndex idx = CheckpointIndex::read(dir);
  const ModelConfig mc = checkpoint_model_config(dir);
  // Tensors in the model's order (as a trained model.safetensors), then the optimizer state.
  const RecordedTensors recorded = recorded_tensors(dir, idx);
  if (!recorded.problems.empty()) throw CheckpointDamaged(recorded.problems[0]);
  if (optimizer)
    require(!idx.meta.value("optimizer", Json()).is_null(), "checkpoint " + dir + " holds no optimizer state: export it without --optimizer");
  std::vector<SafeTensorSpec> specs;
  for (const auto& [name, shape] : recorded.tensors)
    if (optimizer || name.rfind("optimizer.", 0) != 0) specs.push_back({name, DType::f32, shape});
  const fs::path parent = fs::path(out_file).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  SafetensorsWriter out(out_file, specs, weights_metadata(mc));
  std::vector<char> buf;
  for (const SafeTensorSpec& s : specs) {  // one tensor in memory at a time
    buf.resize(size_t(whole_box(s.shape).volume()) * dtype_size(s.dtype));
    read_chunks(dir, idx, {{s.name, s.dtype, s.shape, whole_box(s.shape), buf.data()}});
    out.append(buf.data());
  }
  out.commit();
  write_file_atomic(exported_config_path(out_file), model_to_json(mc).dump(2) + "\n");
}

namespace {

// An earlier `dtrain ckpt import`: a checkpoint with weights only, saved from an imported file. A
// trained checkpoint (its optimizer state, its step) is never replaced by an import.
bool imported_checkpoint(const std::string& dir) {
  try {
    const CheckpointIndex idx = CheckpointIndex::read(dir);
    return idx.meta.value("optimizer", Json()).is_null() && idx.meta.contains("saved_from") &&
           idx.meta["saved_from"].contains("imported");
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

void import_checkpoint(const std::string& file, const std::string& config, const std::string& out_arg,
                       const std::string& vocab) {
  const std::string out_dir = strip_slashes(out_arg);  // "imported/": the folder (its staging folder beside it)
  check_output_folder(out_dir, "dtrain ckpt import", imported_checkpoint);
  SafetensorsFile f(file);
  ModelConfig mc;
  if (config.size() >= 5 && config.substr(config.size() - 5) == ".json") {
    Json j = parse_json(read_file(config, kMaxSmallFileBytes, "config"), config);
    // A run's config.json holds the model under "model", a checkpoint's trainer.json under "config":
    // either is the config a user has; an export's NAME.config.json is the model alone.
    if (j.is_object() && j.contains("config") && j["config"].is_object()) j = j["config"];
    if (j.is_object() && j.contains("model") && j["model"].is_object()) j = j["model"];
    mc = model_from_json(j, config);
  } else {
    RunConfig rc;
    rc.load_toml(config);
    mc = rc.model;
  }
  // What the file decides (a language model's vocabulary: its embedding's rows), by its kind.
  const ModelKind& kind = kind_of(mc);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& n : f.names()) shapes[n] = f.get(n).shape;
  kind.fit_to_weights(mc, shapes, file);
  kind.validate(mc, true);
  Model model(kind.units(mc, cpu_device()), 1);
  float* host = model.host_params();
  std::set<std::string> expected;
  for (const Unit* u : model.units())
    for (const ParamInfo& p : u->params()) {
      require(f.contains(p.name), file + " has no tensor " + p.name + ": the config (" + config +
                                      ") describes another model than the file holds; fix the config");
      f.read_into(p.name, DType::f32, p.shape, host + model.offset_of(*u) + p.offset);
      expected.insert(p.name);
    }
  for (const std::string& n : f.names())
    require(expected.count(n), file + " holds " + n + ", which the model of " + config +
                                   " does not have: fix the config (e.g. model.tied, model.positions)");
  model.upload_host_params();
  World world(DistEnv{}, Millis(60000));
  CheckpointWriter writer(world.all(), 60.0);
  SaveRequest r;
  r.dir = out_dir;
  r.model = mc;
  r.sharded = false;
  r.with_optimizer = false;
  r.kept_name = "vocab.txt";
  r.kept_path = vocab;
  r.saved_from = {{"world", 1}, {"pp", 1}, {"dp_replicate", 1}, {"dp_shard", 1}, {"tp", 1}, {"imported", file}};
  writer.save(r, model, nullptr, nullptr);
}

}  // namespace dtrain
