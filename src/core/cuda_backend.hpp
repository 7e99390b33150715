// The CUDA backend is a plugin, lib/libdtrain_cuda.so beside the programs, opened only when a CUDA
// device or NCCL is asked for: the programs themselves need no CUDA library, so one build (one
// bundle) serves CPU nodes and GPU nodes, and a missing CUDA library is one line at device=cuda.
#pragma once
#include <chrono>
#include <memory>
#include <string>

namespace dtrain {

class ComputeDevice;
class Backend;
class Store;

// What the plugin provides (src/kernels/cuda/plugin.cpp fills it).
struct CudaBackendApi {
  const char* build_id;  // DTRAIN_BUILD_ID of the build that made it: must be this program's
  int (*visible_devices)();
  std::shared_ptr<ComputeDevice> (*make_device)(int index);
  std::string (*device_id)(int index);  // the PCI bus id of visible GPU `index` ("" when unknown)
  std::unique_ptr<Backend> (*connect_nccl)(Store& store, int rank, int size, int gpu, void* compute_stream,
                                           std::chrono::milliseconds timeout, const std::string& group_name);
};

// The name the plugin exports its CudaBackendApi under (a function returning a pointer to it).
inline constexpr const char* kCudaBackendEntry = "dtrain_cuda_backend";

// Where the plugin is: $DTRAIN_CUDA_PLUGIN, else lib/libdtrain_cuda.so beside this program's bin/
// (build/lib, a bundle's lib), else beside the program; "" when there is none (a build without CUDA).
std::string cuda_backend_path();

// The plugin, opened on first use. Error (one line: the library that failed to load, and the fix —
// LD_LIBRARY_PATH for the CUDA libraries) when there is none or it cannot be loaded; `asked_for`
// says what wanted it (e.g. `device = "cuda"`).
const CudaBackendApi& cuda_backend(const std::string& asked_for);

}  // namespace dtrain
