// nvml_usage (see nvml_usage.hpp): the few NVML entry points it calls, declared here with the
// types of NVML's C API, looked up once in libnvidia-ml.so.1.
#include "kernels/cuda/nvml_usage.hpp"

#include <dlfcn.h>

namespace dtrain::cuda {

namespace {

// NVML's C types, as its API defines them (nvmlReturn_t is an enum; 0 is NVML_SUCCESS).
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
struct NvmlDeviceSt;
using NvmlDevice = NvmlDeviceSt*;
struct NvmlUtilization {
  unsigned int gpu;     // percent of the last sample period a kernel ran
  unsigned int memory;  // percent of it the memory was read or written
};
struct NvmlMemory {
  unsigned long long total, free, used;  // bytes
};

struct Nvml {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  bool ready = false;
};

template <class F>
bool find(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(::dlsym(lib, name));
  return f != nullptr;
}

Nvml open_nvml() {
  Nvml n;
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return n;  // no driver library: no GPU figures (kept open once found, for the process)
  if (!find(lib, "nvmlInit_v2", n.init) || !find(lib, "nvmlDeviceGetHandleByPciBusId_v2", n.handle_by_pci_bus_id) ||
      !find(lib, "nvmlDeviceGetUtilizationRates", n.utilization) || !find(lib, "nvmlDeviceGetMemoryInfo", n.memory))
    return n;
  n.ready = n.init() == kNvmlSuccess;
  return n;
}

const Nvml& nvml() {
  static const Nvml n = open_nvml();  // thread-safe initialisation, once
  return n;
}

}  // namespace

std::optional<DeviceUsage> nvml_usage(const std::string& pci_bus_id) {
  const Nvml& n = nvml();
  if (!n.ready) return std::nullopt;
  NvmlDevice device = nullptr;
  NvmlUtilization util{};
  NvmlMemory mem{};
  if (n.handle_by_pci_bus_id(pci_bus_id.c_str(), &device) != kNvmlSuccess ||
      n.utilization(device, &util) != kNvmlSuccess || n.memory(device, &mem) != kNvmlSuccess)
    return std::nullopt;
  return DeviceUsage{double(util.gpu), double(mem.used) / double(1 << 20)};
}

}  // namespace dtrain::cuda
