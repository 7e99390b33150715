// Opening dtrain's plugins (see plugin.hpp).
#include "core/plugin.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/error.hpp"

#ifndef DTRAIN_BUILD_ID
#define DTRAIN_BUILD_ID "unknown"
#endif

namespace fs = std::filesystem;

namespace dtrain {

namespace {

std::string this_program_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace

std::string plugin_path(const PluginSpec& spec) {
  if (const char* p = std::getenv(spec.path_env); p && *p) return p;
  const std::string bin = this_program_dir();
  if (bin.empty()) return "";
  std::error_code ec;
  for (const fs::path& p : {fs::path(bin) / ".." / "lib" / spec.file, fs::path(bin) / spec.file})
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  return "";
}

const void* open_plugin(const PluginSpec& spec, const std::string& asked_for) {
  static std::mutex mu;
  static std::map<std::string, const void*> opened;  // by entry name
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = opened.find(spec.entry); it != opened.end()) return it->second;
  const std::string path = plugin_path(spec);
  require(!path.empty(), asked_for + " but this dtrain has no " + spec.what + " (no " + spec.file +
                             " in the lib/ folder beside its bin/): " + spec.missing_fix);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw Error(asked_for + " needs " + spec.needs + ", and " + path + " cannot be loaded (" +
                (why ? why : "unknown reason") + "): " + spec.load_fix);
  }
  using Entry = const void* (*)();
  const auto entry = reinterpret_cast<Entry>(::dlsym(handle, spec.entry));
  require(entry != nullptr, path + " is not dtrain's " + spec.what + " (it has no " + spec.entry + "): use the " +
                                spec.file + " built with this dtrain");
  const void* api = entry();
  const char* id = api ? *static_cast<const char* const*>(api) : nullptr;
  require(id && std::string(id) == DTRAIN_BUILD_ID,
          path + " was built with another dtrain (build " + (id ? id : "?") + ", this one " + DTRAIN_BUILD_ID +
              "): use the " + spec.file + " built with this dtrain (its lib/ folder)");
  opened[spec.entry] = api;
  return api;
}

}  // namespace dtrain
