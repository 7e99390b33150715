// CPU and GPU counts for --nproc-per-node (see host_counts.hpp).
#include "launch/host_counts.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "core/whole_number.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

// The UUIDs ("GPU-…") in /proc/driver/nvidia/gpus/*/information, one per GPU folder ("" when unknown).
std::vector<std::string> gpu_uuids(const std::string& proc_gpus, int* count) {
  std::vector<std::string> uuids;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(proc_gpus, ec)) {
    std::ifstream info(e.path() / "information");
    std::string line, uuid;
    while (std::getline(info, line)) {
      if (line.rfind("GPU UUID:", 0) == 0) {
        uuid = line.substr(9);
        uuid.erase(0, uuid.find_first_not_of(" \t"));
        uuid.erase(uuid.find_last_not_of(" \t\r") + 1);
      }
    }
    uuids.push_back(uuid);
  }
  *count = int(uuids.size());
  return uuids;
}

int count_dev_files(const std::string& dev) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dev, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("nvidia", 0) == 0 && parse_whole(name.substr(6), 0, 1 << 20)) ++n;
  }
  return n;
}

}  // namespace

int count_nvidia_gpus(const std::string& proc_gpus, const std::string& dev, const char* cuda_visible_devices) {
  int physical = 0;
  const std::vector<std::string> uuids = gpu_uuids(proc_gpus, &physical);
  if (physical == 0) physical = count_dev_files(dev);
  if (!cuda_visible_devices) return physical;
  // CUDA's reading: entries up to the first that names no GPU; each GPU once.
  std::set<std::string> seen;
  const std::string list = cuda_visible_devices;
  size_t k = 0;
  while (k <= list.size() && !list.empty()) {
    size_t c = list.find(',', k);
    if (c == std::string::npos) c = list.size();
    std::string item = list.substr(k, c - k);
    k = c + 1;
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    bool names_a_gpu = false;
    std::string id = item;
    if (const auto i = parse_whole(item, 0, physical - 1); i && physical > 0) {
      names_a_gpu = true;
      id = "#" + std::to_string(*i);
    } else if (item.rfind("GPU-", 0) == 0 && item.size() > 4) {
      // a UUID or a prefix of one; unchecked when the driver does not list them
      const bool listed = std::any_of(uuids.begin(), uuids.end(), [](const std::string& u) { return !u.empty(); });
      names_a_gpu = physical > 0 && (!listed || std::any_of(uuids.begin(), uuids.end(), [&](const std::string& u) {
                                       return u.rfind(item, 0) == 0;
                                     }));
    } else if (item.rfind("MIG-", 0) == 0 && item.size() > 4) {
      names_a_gpu = physical > 0;  // a MIG instance: not listed under /proc
    }
    if (!names_a_gpu) break;
    seen.insert(id);
  }
  return int(seen.size());
}

int visible_gpus(std::string* why_none) {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  const int visible = count_nvidia_gpus("/proc/driver/nvidia/gpus", "/dev", cvd);
  if (why_none && visible == 0) {
    const int here = count_nvidia_gpus("/proc/driver/nvidia/gpus", "/dev", nullptr);
    *why_none = here == 0 ? std::string("no NVIDIA GPU is visible here (none in /proc/driver/nvidia/gpus or /dev/nvidia*)")
                          : "CUDA_VISIBLE_DEVICES='" + std::string(cvd) + "' names none of the " + std::to_string(here) +
                                " GPUs here";
  }
  return visible;
}

}  // namespace dtrain
