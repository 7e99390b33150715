// How many workers `--nproc-per-node cpu|gpu|auto` means: the CPUs this process may run on, and
// the NVIDIA GPUs it can see, counted without CUDA (dtrun does not link it).
#pragma once
#include <string>

#include "core/limits.hpp"  // usable_cpus: the CPUs of this process's affinity mask

namespace dtrain {

// NVIDIA GPUs: one folder per GPU in `proc_gpus` (/proc/driver/nvidia/gpus), or, without it, the
// /dev/nvidiaN device files in `dev`; narrowed as CUDA reads `cuda_visible_devices` (nullptr:
// unset): indices or GPU-/MIG- UUIDs separated by commas, the list ending at the first entry that
// names no GPU ("", "-1", "NoDevFiles": none).
int count_nvidia_gpus(const std::string& proc_gpus, const std::string& dev, const char* cuda_visible_devices);

// The same for this machine and environment; when there are none, `why_none` says why.
int visible_gpus(std::string* why_none = nullptr);

}  // namespace dtrain
