// `dtrain ckpt`: inspect a checkpoint (the layout it was saved from, step, tensors, sizes), verify
// every checksum, export the whole weights as one safetensors file with a config.json (for
// PyTorch and safetensors users), and import outside weights as a checkpoint to start from.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// A readable description of the checkpoint in dir. Error when it has no valid index.
std::string inspect_checkpoint(const std::string& dir);

// Every chunk and file of the checkpoint checked: one line per problem (empty: all good).
std::vector<std::string> verify_checkpoint_folder(const std::string& dir);

// The whole weights (and, with optimizer, the optimizer state as optimizer.FAMILY.PARAM) as one
// safetensors file, written tensor by tensor, plus config.json (the model config) beside it.
void export_checkpoint(const std::string& dir, const std::string& out_file, bool optimizer);

// A weights-only checkpoint folder at out_dir from a safetensors file of the model's tensors (names
// as in docs/model.md). config: a dtrain config (.toml, its [model]) or an exported config.json;
// the vocabulary size comes from the file. vocab: a vocab.txt to include ("" for none).
void import_checkpoint(const std::string& file, const std::string& config, const std::string& out_dir,
                       const std::string& vocab);

}  // namespace dtrain
