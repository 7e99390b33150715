// A GPU's utilisation and memory in use through NVML, which is opened with dlopen at first use
// (the driver's libnvidia-ml.so.1), so the plugin neither links it nor needs its header.
#pragma once
#include <optional>
#include <string>

#include "core/device_usage.hpp"

namespace dtrain::cuda {

// The usage of the GPU at `pci_bus_id` (cudaDeviceGetPCIBusId's form, "0000:65:00.0"); nullopt
// when NVML is missing or fails to start, or does not know the GPU. Never throws; thread-safe.
std::optional<DeviceUsage> nvml_usage(const std::string& pci_bus_id);

}  // namespace dtrain::cuda
