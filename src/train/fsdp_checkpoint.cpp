// FSDP checkpoints (see fsdp_checkpoint.hpp).
#include "train/fsdp_checkpoint.hpp"

#include <unistd.h>

#include <filesystem>

#include "core/atomic_file.hpp"
#include "ckpt/safetensors.hpp"
#include "train/config.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

std::string shard_file(const std::string& dir, int shard, int shards) {
  return dir + "/shards/shard-" + std::to_string(shard) + "-of-" + std::to_string(shards) + ".safetensors";
}

// The whole weights, unit by unit: each unit gathered (collective over its shard ranks), written by
// rank 0, dropped before the next.
void write_gathered_weights(const std::string& path, FullyShardedDataParallel& fsdp, const TransformerLM& model,
                            bool writer) {
  std::vector<SafeTensorSpec> specs;
  for (const Unit* u : model.units())
    for (const ParamInfo& p : u->params()) specs.push_back({p.name, DType::f32, p.shape});
  std::unique_ptr<SafetensorsWriter> out;
  if (writer) out = std::make_unique<SafetensorsWriter>(path, specs, weights_metadata(model.config()));
  std::vector<float> unit;
  for (size_t k = 0; k < model.units().size(); ++k) {
    const Unit& u = *model.units()[k];
    unit.resize(size_t(u.numel()));
    fsdp.gather_full(k, unit.data());
    if (out)
      for (const ParamInfo& p : u.params()) out->append(unit.data() + p.offset);
  }
  if (out) out->commit();
}

}  // namespace

int fsdp_checkpoint_shards(const std::string& dir) {
  const fs::path shards = fs::path(dir) / "shards";
  if (!fs::is_directory(shards)) return 0;
  for (const auto& e : fs::directory_iterator(shards)) {
    const std::string n = e.path().filename().string();
    const size_t of = n.find("-of-");
    if (n.rfind("shard-", 0) == 0 && of != std::string::npos) return std::atoi(n.c_str() + of + 4);
  }
  return 0;
}

void save_fsdp_checkpoint(const std::string& dir, FullyShardedDataParallel& fsdp, TransformerLM& model,
                          Optimizer* opt, const TrainerState* state, const Json& run_config,
                          const std::string& vocab_path, ProcessGroup& all, bool writes_shards) {
  const bool root = all.rank() == 0;
  // Every rank writes into rank 0's staging folder.
  int64_t pid = root ? int64_t(::getpid()) : 0;
  all.broadcast(&pid, 1, ElemType::i64, 0);
  const std::string staged = dir + ".staging." + std::to_string(pid);
  if (root) {
    remove_leftovers_of(dir);
    fs::create_directories(staged + "/shards");
  }
  all.barrier();
  write_gathered_weights(staged + "/model.safetensors", fsdp, model, root);
  if (opt && writes_shards) {
    const ProcessGroup& g = fsdp.shard_group();
    std::vector<SafeTensorView> v;
    for (size_t k = 0; k < fsdp.num_units(); ++k)
      v.push_back({"param." + std::to_string(k), DType::f32, {fsdp.shard_numel(k)}, fsdp.param_shard(k)});
    for (const auto& s : opt->state()) v.push_back({s.name, DType::f32, {s.numel}, s.data});
    std::vector<float> host_params;  // the shards' parameters as host memory (a no-op copy on the CPU)
    if (!model.device().host_accessible()) {
      int64_t n = 0;
      for (size_t k = 0; k < fsdp.num_units(); ++k) n += fsdp.shard_numel(k);
      host_params.resize(size_t(n));
      model.device().download(host_params.data(), fsdp.param_shard(0), sizeof(float) * size_t(n));
      int64_t off = 0;
      for (size_t k = 0; k < fsdp.num_units(); ++k) {
        v[k].data = host_params.data() + off;
        off += fsdp.shard_numel(k);
      }
    }
    write_safetensors(shard_file(staged, g.rank(), g.size()), v,
                      {{"optimizer", opt->config().name},
                       {"steps", std::to_string(opt->steps_taken())},
                       {"dtrain.model", model_to_json(model.config()).dump()}});
  }
  if (root) write_checkpoint_extras(staged, state, run_config, vocab_path);
  all.barrier();  // every file is written and synced
  if (root) {
    if (!opt) fs::remove(staged + "/shards");
    fs::create_directories(fs::path(dir).parent_path().empty() ? fs::path(".") : fs::path(dir).parent_path());
    replace_dir_atomic(staged, dir);
  }
  all.barrier();  // the checkpoint is in place before anyone goes on
}

void load_fsdp_checkpoint(const std::string& dir, FullyShardedDataParallel& fsdp, const TransformerLM& model,
                          Optimizer& opt, TrainerState* state) {
  require_same_model(dir, model.config());
  const ProcessGroup& g = fsdp.shard_group();
  const int saved = fsdp_checkpoint_shards(dir);
  require(saved == g.size(),
          "checkpoint " + dir + (saved == 0 ? std::string(" was written without FSDP (no shards)")
                                            : " holds FSDP shards for " + std::to_string(saved) + " ranks") +
              ", this run shards over " + std::to_string(g.size()) + ": resume with parallel.dp_shard = " +
              std::to_string(saved == 0 ? 1 : saved) + " (the layout it was saved at)");
  const std::string path = shard_file(dir, g.rank(), g.size());
  SafetensorsFile f(path);
  require(f.metadata().count("optimizer") && f.metadata().at("optimizer") == opt.config().name,
          path + " holds state of another optimizer: resume with the same optim.name");
  std::vector<float> host;
  for (size_t k = 0; k < fsdp.num_units(); ++k) {
    host.resize(size_t(fsdp.shard_numel(k)));
    f.read_into("param." + std::to_string(k), DType::f32, {fsdp.shard_numel(k)}, host.data());
    model.device().upload(fsdp.param_shard(k), host.data(), sizeof(float) * host.size());
  }
  for (const auto& s : opt.state()) f.read_into(s.name, DType::f32, {s.numel}, s.data);
  opt.upload_state();
  opt.set_steps_taken(std::stoll(f.metadata().at("steps")));
  if (state) {
    const std::string t = dir + "/trainer.json";
    *state = TrainerState::from_json(parse_json(read_file(t), t), t);
  }
}

}  // namespace dtrain
