// Opening the CUDA backend plugin (see cuda_backend.hpp), through core/plugin.
#include "core/cuda_backend.hpp"

#include "core/plugin.hpp"

namespace dtrain {

namespace {

const PluginSpec kCudaPlugin{
    "libdtrain_cuda.so",
    "DTRAIN_CUDA_PLUGIN",
    kCudaBackendEntry,
    "CUDA backend",
    "build it on a machine with the CUDA toolkit (scripts/build.sh -DDTRAIN_CUDA=ON), or use --set device=cpu",
    "the CUDA libraries",
    "add the folder of the CUDA and NCCL libraries (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH, or use "
    "--set device=cpu"};

}  // namespace

std::string cuda_backend_path() { return plugin_path(kCudaPlugin); }

const CudaBackendApi& cuda_backend(const std::string& asked_for) {
  return load_plugin<CudaBackendApi>(kCudaPlugin, asked_for);
}

}  // namespace dtrain
