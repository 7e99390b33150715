// A stand-in for the CUDA plugin (DTRAIN_CUDA_PLUGIN=build/lib/libdtrain_standin_cuda.so), so that
// what a GPU node's environment decides can be tested without a GPU: it reports
// $DTRAIN_STANDIN_GPUS GPUs (ids 0000:0N:00.0) and refuses to make a device or an NCCL group.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/cuda_backend.hpp"

#ifndef DTRAIN_BUILD_ID
#error "the stand-in plugin needs DTRAIN_BUILD_ID (set by CMake)"
#endif

namespace {

int standin_count() {
  const char* n = std::getenv("DTRAIN_STANDIN_GPUS");
  return n ? std::atoi(n) : 0;
}

std::string standin_id(int index) { return "0000:0" + std::to_string(index) + ":00.0"; }

std::shared_ptr<dtrain::ComputeDevice> standin_device(int index) {
  throw std::runtime_error("stand-in CUDA plugin: GPU " + std::to_string(index) + " is not real");
}

std::unique_ptr<dtrain::Backend> standin_nccl(dtrain::Store&, int, int, int, void*, std::chrono::milliseconds,
                                              const std::string&) {
  throw std::runtime_error("stand-in CUDA plugin: no NCCL");
}

const dtrain::CudaBackendApi kApi{DTRAIN_BUILD_ID, &standin_count, &standin_device, &standin_id, &standin_nccl};

}  // namespace

extern "C" __attribute__((visibility("default"))) const dtrain::CudaBackendApi* dtrain_cuda_backend() {
  return &kApi;
}
