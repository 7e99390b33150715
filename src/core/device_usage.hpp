// DeviceUsage: what a compute device reports of its own use (how busy it is, memory in use), as
// ComputeDevice::usage() gives it and the resource sampler records it.
#pragma once

namespace dtrain {

struct DeviceUsage {
  double util_percent = 0.0;  // share of the last sample period the device ran a kernel, 0-100
  double mem_used_mb = 0.0;   // device memory in use, every process's (MiB)
};

}  // namespace dtrain
