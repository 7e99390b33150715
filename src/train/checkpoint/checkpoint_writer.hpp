// Writing checkpoint folders from every rank at once: in the sharded format each rank writes one
// data file with its share of the state, in the full format rank 0 streams one model.safetensors
// (and optimizer.safetensors) while the units are gathered one by one. Either way the folder is
// staged, rank 0 writes the index once every rank is done, and the folder is renamed into place;
// only then may older checkpoints be pruned. Sharded saves can run in the background.
#pragma once
#include <algorithm>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/process_group.hpp"
#include "train/checkpoint/checkpoint.hpp"

namespace dtrain {

struct SaveRequest {
  std::string dir;
  ModelConfig model;          // what the checkpoint is of (its kind and config, in the index)
  TpSlice tp_slice;           // this rank's tensor-parallel slice of the model
  bool sharded = true;        // false: the full format (one safetensors file of the whole model)
  bool async = false;         // sharded only: files written by a background thread
  bool with_optimizer = true; // false: weights only (model_best, model_final)
  const TrainerState* state = nullptr;  // written as trainer.json with run_config (null: none)
  Json run_config;
  std::string kept_name, kept_path;  // the data's file copied beside the model as kept_name ("": none)
  Json saved_from;            // the layout, recorded in the index
  int part = 0, parts = 1;    // this rank's share of what it holds (ranks holding the same values)
  int expert_part = 0, expert_parts = 1;  // the same for its expert units (expert parallel: fewer ranks hold them)
  ProcessGroup* tp = nullptr; // tensor parallel: the slices, joined into whole tensors for the full format
  std::function<void()> after_commit;  // rank 0, once the folder is in place (pruning)
};

struct SaveReport {
  double stall_seconds = 0.0;  // how long save() held the caller
  int64_t bytes = 0;           // data bytes of the checkpoint, every rank's (or, async, to be written)
};

class CheckpointWriter {
 public:
  // all: every rank of the job (saves are collective). timeout_s: how long rank 0 waits for the
  // other ranks' files of a background save.
  CheckpointWriter(ProcessGroup& all, double timeout_s);
  ~CheckpointWriter();  // waits for a save in flight
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Collective. Waits for the save before (so at most one is in flight).
  SaveReport save(const SaveRequest& request, Model& model, FullyShardedDataParallel* fsdp,
                  Optimizer* optimizer);
  // Waits for the background save in flight, if any, and returns how long its writing took
  // (0 when none); rethrows its error.
  double wait();
  // The most host memory its saves held at once beside the model's own (a tensor-parallel full
  // save's join of the largest cut parameter, a background save's copy of this rank's share).
  size_t buffer_bytes() const { return buffer_peak_; }

 private:
  void note_buffers(size_t live) { buffer_peak_ = std::max(buffer_peak_, live + staging_.capacity()); }
  void save_full(const SaveRequest& r, const std::string& staged, Model& model,
                 FullyShardedDataParallel* fsdp, Optimizer* opt, CheckpointIndex& index);
  void write_part(const std::string& staged, const std::vector<ChunkSource>& sources) const;
  void commit(const SaveRequest& r, const std::string& staged, CheckpointIndex index, bool wait_for_parts) const;

  ProcessGroup& all_;
  double timeout_s_;
  std::vector<char> staging_;  // background saves: this rank's share, copied
  std::thread worker_;
  std::exception_ptr error_;
  double write_seconds_ = 0.0;
  size_t buffer_peak_ = 0;
};

}  // namespace dtrain
