// This rank's compute device from train.device. auto is resolved (a GPU when one is visible and the
// CUDA backend loads, else the CPU) and rank 0 says the choice in one line; on GPUs every rank's
// view is gathered, so that ranks that chose differently or two ranks on one GPU are refused in one
// line and GPUs that no rank uses are named in one warning per node (kernels/gpu_placement.hpp).
#pragma once
#include <memory>

#include "comm/world.hpp"
#include "kernels/device.hpp"
#include "train/config.hpp"

namespace dtrain {

std::shared_ptr<ComputeDevice> open_device(const TrainConfig& t, World& world);

// Whether train.device resolves to a GPU on this rank (before the world exists: its backend).
bool runs_on_gpu(const TrainConfig& t);

}  // namespace dtrain
