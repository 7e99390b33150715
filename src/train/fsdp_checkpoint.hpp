// Checkpoints of a model whose parameters live as FSDP shards: the whole weights as one
// model.safetensors (gathered and written one unit at a time by rank 0, so no rank ever holds the
// whole model), and each shard's exact parameters and optimizer state in shards/, written by the
// ranks of the first replica at once. Staged and swapped in atomically like every checkpoint.
#pragma once
#include <string>

#include "comm/process_group.hpp"
#include "parallel/fsdp/fsdp.hpp"
#include "train/checkpoint.hpp"

namespace dtrain {

// Collective over `all` (every rank calls it). optimizer null: weights only (model_best,
// model_final: a plain checkpoint any layout and PyTorch can load). writes_shards: this rank's
// replica writes the shard files (the first replica; the others hold the same shards).
void save_fsdp_checkpoint(const std::string& dir, FullyShardedDataParallel& fsdp, TransformerLM& model,
                          Optimizer* optimizer, const TrainerState* state, const Json& run_config,
                          const std::string& vocab_path, ProcessGroup& all, bool writes_shards);

// Each rank reads its own shard file (parameters and optimizer state) and the trainer state. Error
// naming the fix when the checkpoint was written for another model or another shard count.
void load_fsdp_checkpoint(const std::string& dir, FullyShardedDataParallel& fsdp, const TransformerLM& model,
                          Optimizer& optimizer, TrainerState* state);

// How many shards a checkpoint's parameters were saved in (0: a plain, unsharded checkpoint).
int fsdp_checkpoint_shards(const std::string& dir);

}  // namespace dtrain
