// The GPU backend over NCCL, inside the CUDA plugin (programs reach it through
// core/cuda_backend.hpp): one communicator per process group, bootstrapped through the group's
// store, its operations queued on a stream of their own and ordered with the compute stream by
// events (the host never waits for them, except in barrier()).
#pragma once
#include <memory>
#include <string>

#include "comm/process_group.hpp"

namespace dtrain {

// Rank `rank` of `size` joins through `store` (already scoped to the group): rank 0 makes the
// NCCL id and publishes it. `gpu`: the device index; `compute_stream`: the cudaStream_t the data
// is produced and consumed on. Buffers passed to the backend's operations are device memory.
std::unique_ptr<Backend> connect_nccl(Store& store, int rank, int size, int gpu, void* compute_stream, Millis timeout,
                                      const std::string& group_name);

}  // namespace dtrain
