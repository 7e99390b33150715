// Tensor parallelism's gradient bookkeeping over the shards the optimizer steps: the gradients a
// slice holds only its rows' share of (norms under sequence parallel) summed across the tp group,
// and the global gradient norm with replicated parameters counted once.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/process_group.hpp"
#include "kernels/device.hpp"
#include "optim/optimizer.hpp"

namespace dtrain {

// Where an optimizer shard lies: elements [begin, begin + shard.numel) of a unit's flat buffer.
struct ShardOf {
  const Unit* unit;
  int64_t begin;
};

class TensorParallelGrads {
 public:
  TensorParallelGrads(ProcessGroup& group, std::vector<ParamShard> shards, std::vector<ShardOf> where,
                      ComputeDevice& device);
  // After the data-parallel reduction: partial gradients summed across the slices.
  void finish_gradients();
  // This rank's part of the squared global gradient norm: cut parameters' squares, and replicated
  // ones' divided by the slices (each holds them whole); its sum over the tp group (and the FSDP
  // shard group) is the square of the norm.
  double grad_sumsq_part();

 private:
  struct Range {
    float* grad;
    int64_t n;
  };
  ProcessGroup& group_;
  ComputeDevice& dev_;
  std::vector<Range> partial_, cut_, replicated_;
  Buffer staging_;  // the partial gradients packed for one all-reduce
  int64_t staged_ = 0;
  Buffer acc_;  // two doubles on the device
};

}  // namespace dtrain
