// open_device (see device_setup.hpp).
#include "train/device_setup.hpp"

#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"
#include "core/host_name.hpp"
#include "core/log_level.hpp"
#include "kernels/gpu_placement.hpp"

namespace dtrain {

namespace {

// What this rank sees and would use.
RankGpus my_view(const DeviceResolution& d, World& world) {
  RankGpus mine;
  mine.rank = world.rank();
  mine.host = host_name();
  mine.device = d.device;
  mine.why = d.why;
  if (const char* s = std::getenv("SLURM_GPUS_ON_NODE")) mine.slurm_gpus_on_node = std::atoi(s);
  if (d.device == "cpu") return mine;
  const int local_rank = world.env().local_rank;
  try {
    mine.visible = visible_gpu_ids();
    mine.chosen = gpu_index_for(d.device, local_rank, int(mine.visible.size()));
    if (mine.chosen < 0 || size_t(mine.chosen) >= mine.visible.size())
      make_device(d.device, local_rank);  // throws the line that says why there is no such GPU
  } catch (const Error& e) {
    mine.error = std::string(e.what()).substr(0, 1000);  // the view travels in 2048 bytes
  }
  return mine;
}

std::vector<RankGpus> gather(const RankGpus& mine, World& world) {
  std::vector<RankGpus> all;
  if (world.size() == 1) return {mine};
  for (const std::string& text : world.allgather_text(encode_rank_gpus(mine), 2048))
    all.push_back(decode_rank_gpus(text));
  return all;
}

}  // namespace

bool runs_on_gpu(const TrainConfig& t) { return resolve_device(t.device).device != "cpu"; }

std::shared_ptr<ComputeDevice> open_device(const TrainConfig& t, World& world) {
  const DeviceResolution d = resolve_device(t.device);
  const bool root = world.rank() == 0 && logs_at(LogLevel::info);
  if (t.device == "cpu") {
    if (root) std::printf("device: cpu\n");
    return make_device("cpu", 0);
  }
  const RankGpus mine = my_view(d, world);
  const std::vector<RankGpus> all = gather(mine, world);
  const GpuPlacement placement = check_gpu_placement(all, t.share_gpus);
  same_on_every_rank([&] { require(placement.refusal.empty(), placement.refusal); });
  for (const GpuPlacement::Warning& w : placement.warnings)
    if (w.rank == world.rank()) std::fprintf(stderr, "dtrain: warning: %s\n", w.line.c_str());
  std::shared_ptr<ComputeDevice> dev = make_device(d.device, world.env().local_rank);
  if (root) {
    const std::string which = d.device == "cuda" && world.size() > 1
                                  ? "the GPU of each rank's local rank (rank 0: " + dev->describe() + ")"
                                  : d.device == "cpu" ? "cpu" : dev->describe();
    std::printf("device: %s; %s\n", which.c_str(), d.why.c_str());
  }
  return dev;
}

}  // namespace dtrain
