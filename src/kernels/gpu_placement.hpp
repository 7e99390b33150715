// Which GPU each rank uses, judged from what every rank sees: two ranks on one GPU are refused (each
// would get a fraction of it, and NCCL cannot join them) unless allowed, and GPUs that a node's
// ranks see but none uses are named in one warning (the course's "we are still using 1 GPU").
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// What one rank sees, gathered from every rank before its device is made.
struct RankGpus {
  int rank = 0;
  std::string host;
  std::vector<std::string> visible;  // ids (PCI bus ids) of the GPUs it sees, in CUDA's order
  int chosen = -1;                   // the index into `visible` it would use
  int slurm_gpus_on_node = -1;       // SLURM_GPUS_ON_NODE, or -1
  std::string device;                // what train.device resolved to on this rank (cpu, cuda, cuda:N)
  std::string why;                   // how (resolve_device's why)
  std::string error;                 // why this rank cannot use a GPU ("" when it can)
};

struct GpuPlacement {
  std::string refusal;  // non-empty: two or more ranks on one GPU, and why / what to do
  struct Warning {
    int rank;  // the rank that says it (the lowest of its host)
    std::string line;
  };
  std::vector<Warning> warnings;  // idle GPUs, one per host that has them
};

// `share_allowed`: train.share_gpus. Refused too: ranks that resolved train.device differently
// (auto found a GPU on some and none on others), and a rank that cannot use a GPU (its error).
GpuPlacement check_gpu_placement(const std::vector<RankGpus>& ranks, bool share_allowed);

// The GPU index a rank uses for train.device (cuda: the local rank's, wrapping when the node has
// fewer GPUs than ranks; cuda:N: N), of `count` visible; -1 when it names none.
int gpu_index_for(const std::string& device, int local_rank, int count);

// One line-safe text of a RankGpus (to gather between ranks) and back.
std::string encode_rank_gpus(const RankGpus& r);
RankGpus decode_rank_gpus(const std::string& text);

}  // namespace dtrain
