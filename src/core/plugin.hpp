// dtrain's plugins (the CUDA backend, the MPI backend): shared libraries of the same build in the
// lib/ folder beside the programs' bin/, opened only when what they provide is asked for, so the
// programs link none of their libraries and one build (one bundle) serves every node.
#pragma once
#include <string>
#include <type_traits>

namespace dtrain {

struct PluginSpec {
  const char* file;         // "libdtrain_cuda.so"
  const char* path_env;     // "DTRAIN_CUDA_PLUGIN": where it is, instead of the search
  const char* entry;        // the exported function that returns the plugin's API
  const char* what;         // "CUDA backend"
  const char* missing_fix;  // the fix when this build has none ("build it ... or use ...")
  const char* needs;        // what it loads ("the CUDA libraries")
  const char* load_fix;     // the fix when it cannot be loaded ("add ... to LD_LIBRARY_PATH ...")
};

// $path_env, else lib/FILE beside this program's bin/ (build/lib, a bundle's lib), else FILE beside
// the program; "" when there is none (a build without it).
std::string plugin_path(const PluginSpec& spec);

// The plugin's API, opened on the first call and kept: the entry's result, whose first member must
// be the build id of the build that made it (checked against this program's). Error (one line
// naming the library that failed to load and the fix) when there is none or it cannot be loaded;
// `asked_for` says what wanted it (e.g. `device = "cuda"`).
const void* open_plugin(const PluginSpec& spec, const std::string& asked_for);

template <class Api>
const Api& load_plugin(const PluginSpec& spec, const std::string& asked_for) {
  static_assert(std::is_standard_layout_v<Api>, "a plugin's API starts with its build id");
  return *static_cast<const Api*>(open_plugin(spec, asked_for));
}

}  // namespace dtrain
