// `dtrain ckpt`: inspect a checkpoint (the layout it was saved from, step, tensors, sizes), verify
// every checksum, export the whole weights as one safetensors file with its NAME.config.json (for
// PyTorch and safetensors users), and import outside weights as a checkpoint to start from.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// A readable description of the checkpoint in dir. Error when it has no valid index.
std::string inspect_checkpoint(const std::string& dir);

// The index checked (its chunks tile every tensor, its tensors fit the model it records) and every
// chunk and file against its checksum: one line per problem (empty: all good).
std::vector<std::string> verify_checkpoint_folder(const std::string& dir);

// The whole weights (and, with optimizer, the optimizer state as optimizer.FAMILY.PARAM) as one
// safetensors file, written tensor by tensor, plus the model config beside it as
// exported_config_path(out_file): never a run dir's own config.json or another export's.
void export_checkpoint(const std::string& dir, const std::string& out_file, bool optimizer);
// "x/model.safetensors" -> "x/model.config.json" (any other name: NAME + ".config.json").
std::string exported_config_path(const std::string& out_file);

// A weights-only checkpoint folder at out_dir from a safetensors file of the model's tensors (names
// as in docs/model.md). config: a dtrain config (.toml, its [model]) or an exported config.json;
// the vocabulary size comes from the file. vocab: a vocab.txt to include ("" for none).
void import_checkpoint(const std::string& file, const std::string& config, const std::string& out_dir,
                       const std::string& vocab);

}  // namespace dtrain
