// Opening the CUDA backend plugin (see cuda_backend.hpp).
#include "core/cuda_backend.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/error.hpp"

#ifndef DTRAIN_BUILD_ID
#define DTRAIN_BUILD_ID "unknown"
#endif

namespace fs = std::filesystem;

namespace dtrain {

namespace {

inline constexpr const char* kPluginFile = "libdtrain_cuda.so";

std::string this_program_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace

std::string cuda_backend_path() {
  if (const char* p = std::getenv("DTRAIN_CUDA_PLUGIN"); p && *p) return p;
  const std::string bin = this_program_dir();
  if (bin.empty()) return "";
  std::error_code ec;
  for (const fs::path& p : {fs::path(bin) / ".." / "lib" / kPluginFile, fs::path(bin) / kPluginFile})
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  return "";
}

const CudaBackendApi& cuda_backend(const std::string& asked_for) {
  static std::mutex mu;
  static const CudaBackendApi* api = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (api) return *api;
  const std::string path = cuda_backend_path();
  require(!path.empty(), asked_for + " but this dtrain has no CUDA backend (no " + kPluginFile +
                             " in the lib/ folder beside its bin/): build it on a machine with the CUDA toolkit "
                             "(scripts/build.sh -DDTRAIN_CUDA=ON), or use --set device=cpu");
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw Error(asked_for + " needs the CUDA libraries, and " + path + " cannot be loaded (" +
                (why ? why : "unknown reason") +
                "): add the folder of the CUDA and NCCL libraries (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH, "
                "or use --set device=cpu");
  }
  using Entry = const CudaBackendApi* (*)();
  const auto entry = reinterpret_cast<Entry>(::dlsym(handle, kCudaBackendEntry));
  require(entry != nullptr, path + " is not dtrain's CUDA backend (it has no " + kCudaBackendEntry +
                                "): use the " + kPluginFile + " built with this dtrain");
  const CudaBackendApi* found = entry();
  require(found && std::string(found->build_id) == DTRAIN_BUILD_ID,
          path + " was built with another dtrain (build " + (found ? found->build_id : "?") + ", this one " +
              DTRAIN_BUILD_ID + "): use the " + kPluginFile + " built with this dtrain (its lib/ folder)");
  api = found;
  return *api;
}

}  // namespace dtrain
