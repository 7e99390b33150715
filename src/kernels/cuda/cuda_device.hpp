// Entry points of the CUDA backend, inside the plugin libdtrain_cuda.so (plugin.cpp exports them;
// the programs reach them through core/cuda_backend.hpp).
#pragma once
#include <memory>
#include <string>

#include "kernels/device.hpp"

namespace dtrain {

// The device for GPU `index` (of those visible), with its own stream, cuBLASLt handle and buffers.
std::shared_ptr<ComputeDevice> make_cuda_device(int index);
// GPUs visible to this process (0 when there is no driver or no GPU).
int cuda_visible_devices();
// The PCI bus id of visible GPU `index` ("0000:1B:00.0"; "" when CUDA cannot say).
std::string cuda_device_id(int index);

}  // namespace dtrain
