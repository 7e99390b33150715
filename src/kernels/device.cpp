// make_device: the CPU, or the GPU a process should use (see device.hpp).
#include "kernels/device.hpp"

#include <cstdlib>

#include "core/cuda_backend.hpp"
#include "core/error.hpp"
#include "kernels/gpu_placement.hpp"

namespace dtrain {

bool cuda_built() { return !cuda_backend_path().empty(); }

int cuda_device_count() {
  if (!cuda_built()) return 0;
  try {
    return cuda_backend("counting GPUs").visible_devices();
  } catch (const Error&) {
    return 0;  // the plugin is there but the CUDA libraries are not: no GPU usable (device=cuda says why)
  }
}

DeviceResolution resolve_device(const std::string& setting) {
  if (setting != "auto") return {setting, "train.device = " + setting};
  if (!cuda_built()) return {"cpu", "auto: this dtrain has no CUDA backend"};
  int count = 0;
  try {
    count = cuda_backend("train.device = auto").visible_devices();
  } catch (const Error& e) {
    return {"cpu", std::string("auto: the CUDA backend cannot be loaded (") + e.what() + ")"};
  }
  if (count == 0) {
    const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
    return {"cpu", std::string("auto: no GPU visible") + (v ? std::string(" (CUDA_VISIBLE_DEVICES=") + v + ")" : "")};
  }
  return {"cuda", "auto: " + std::to_string(count) + (count == 1 ? " GPU" : " GPUs") + " visible"};
}

std::vector<std::string> visible_gpu_ids() {
  std::vector<std::string> ids;
  const int count = cuda_device_count();
  if (count == 0) return ids;
  const CudaBackendApi& cuda = cuda_backend("listing GPUs");
  for (int i = 0; i < count; ++i) {
    std::string id = cuda.device_id(i);
    ids.push_back(id.empty() ? "index " + std::to_string(i) : id);
  }
  return ids;
}

std::shared_ptr<ComputeDevice> make_device(const std::string& name, int local_rank) {
  if (name == "cpu") return std::shared_ptr<ComputeDevice>(&cpu_device(), [](ComputeDevice*) {});
  require(name == "cuda" || name.rfind("cuda:", 0) == 0,
          "device = \"" + name + "\" is unknown: use \"cpu\", \"cuda\" (one GPU per local rank) or \"cuda:N\"");
  const CudaBackendApi& cuda = cuda_backend("device = \"" + name + "\"");  // one line when CUDA cannot be loaded
  const int count = cuda.visible_devices();
  require(count > 0, "device = \"" + name + "\" but no GPU is visible (check nvidia-smi and "
                     "CUDA_VISIBLE_DEVICES), or use --set device=cpu");
  const int index = gpu_index_for(name, local_rank, count);
  require(index >= 0 && index < count, "device = \"" + name + "\" names no visible GPU (" + std::to_string(count) +
                                           " visible): use cuda:0.." + std::to_string(count - 1) + " or \"cuda\"");
  return cuda.make_device(index);
}

}  // namespace dtrain
