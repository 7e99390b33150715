// What one rank holds of the model and optimizer state, as checkpoint boxes under global names:
// each unit's parameters (or this rank's FSDP shard of them) and the optimizer state laid out like
// them, named `PARAM` and `optimizer.FAMILY.PARAM` (docs/checkpoints.md). Saving takes one share of
// it (ranks holding the same values split the writing); loading fills all of it, from any layout.
#pragma once
#include <string>
#include <vector>

#include "ckpt/chunk_io.hpp"
#include "nn/model.hpp"
#include "optim/optimizer.hpp"
#include "parallel/fsdp/fsdp.hpp"

namespace dtrain {

class RankState {
 public:
  // fsdp null: the model owns whole parameters. optimizer null: weights only. Device state is
  // copied to host memory here (a no-op on the CPU, where the host buffers are the state itself).
  // tp: the model's tensor-parallel slice (saving splits what every slice holds whole among them).
  RankState(Model& model, FullyShardedDataParallel* fsdp, Optimizer* optimizer, TpSlice tp = {});

  // Boxes of part `part` of `parts` of what this rank holds (parts: the ranks holding the same
  // values; each writes its part, so all of them write at once); of its expert units, part `experts`.
  struct Part {
    int64_t part = 0, parts = 1;
  };
  std::vector<ChunkSource> save_sources(Part part, Part experts) const;
  // Boxes covering everything this rank holds, to be filled from a checkpoint.
  std::vector<ChunkTarget> load_targets();
  // After load_targets' buffers were filled: the device uses them.
  void upload();

  // Global name of an optimizer state tensor.
  static std::string optimizer_tensor(const std::string& family, const std::string& param);

 private:
  struct Held {
    const Unit* unit;
    int64_t begin, end;  // elements [begin, end) of the unit's flat parameters (end ≤ numel)
    std::vector<std::pair<std::string, float*>> buffers;  // (name prefix, host data of element begin)
  };
  template <class Fn>
  void for_each_box(Part part, Part experts, bool writing, Fn&& fn) const;

  Model& model_;
  TpSlice tp_;
  FullyShardedDataParallel* fsdp_;
  Optimizer* opt_;
  std::vector<float> shard_host_;  // FSDP parameter shards on a device: their host copy
  std::vector<Held> held_;
};

}  // namespace dtrain
