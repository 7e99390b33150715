// make_device: the CPU, or the GPU a process should use (see device.hpp).
#include "kernels/device.hpp"

#include "core/error.hpp"
#ifdef DTRAIN_HAVE_CUDA
#include "kernels/cuda/cuda_device.hpp"
#endif

namespace dtrain {

bool cuda_built() {
#ifdef DTRAIN_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef DTRAIN_HAVE_CUDA
  return cuda_visible_devices();
#else
  return 0;
#endif
}

std::shared_ptr<ComputeDevice> make_device(const std::string& name, int local_rank) {
  if (name == "cpu") return std::shared_ptr<ComputeDevice>(&cpu_device(), [](ComputeDevice*) {});
  const bool any = name == "cuda";
  require(any || name.rfind("cuda:", 0) == 0,
          "device = \"" + name + "\" is unknown: use \"cpu\", \"cuda\" (one GPU per local rank) or \"cuda:N\"");
  require(cuda_built(), "device = \"" + name + "\" but this dtrain was built without CUDA: rebuild on a machine "
                        "with the CUDA toolkit (scripts/build.sh -DDTRAIN_CUDA=ON), or use --set device=cpu");
  const int count = cuda_device_count();
  require(count > 0, "device = \"" + name + "\" but no GPU is visible (check nvidia-smi and "
                     "CUDA_VISIBLE_DEVICES), or use --set device=cpu");
  int index = local_rank % count;
  if (!any) {
    const std::string n = name.substr(5);
    require(!n.empty() && n.size() <= 6 && n.find_first_not_of("0123456789") == std::string::npos &&
                std::stoi(n) < count,
            "device = \"" + name + "\" names no visible GPU (" + std::to_string(count) + " visible): use cuda:0.." +
                std::to_string(count - 1) + " or \"cuda\"");
    index = std::stoi(n);
  }
#ifdef DTRAIN_HAVE_CUDA
  return make_cuda_device(index);
#else
  (void)index;
  return nullptr;
#endif
}

}  // namespace dtrain
