// The CUDA backend plugin's one exported symbol (core/cuda_backend.hpp): the device, the GPU count
// and NCCL process groups, as the programs find them when a CUDA device is asked for.
#include "comm/nccl/nccl_backend.hpp"
#include "core/cuda_backend.hpp"
#include "kernels/cuda/cuda_device.hpp"

#ifndef DTRAIN_BUILD_ID
#error "the CUDA plugin needs DTRAIN_BUILD_ID (set by CMake) to be checked against the programs that load it"
#endif

namespace dtrain {
namespace {

std::unique_ptr<Backend> nccl(Store& store, int rank, int size, int gpu, void* stream, std::chrono::milliseconds timeout,
                              const std::string& group) {
  return connect_nccl(store, rank, size, gpu, stream, timeout, group);
}

const CudaBackendApi kApi{DTRAIN_BUILD_ID, &cuda_visible_devices, &make_cuda_device, &cuda_device_id, &nccl};

}  // namespace
}  // namespace dtrain

extern "C" __attribute__((visibility("default"))) const dtrain::CudaBackendApi* dtrain_cuda_backend() {
  return &dtrain::kApi;
}
