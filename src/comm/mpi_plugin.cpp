// Opening the MPI backend plugin (see mpi_plugin.hpp), through core/plugin.
#include "comm/mpi_plugin.hpp"

#include "core/plugin.hpp"

namespace dtrain {

namespace {

const PluginSpec kMpiPlugin{
    "libdtrain_mpi.so",
    "DTRAIN_MPI_PLUGIN",
    kMpiBackendEntry,
    "MPI backend",
    "install libopenmpi-dev and build again (scripts/install-deps.sh, scripts/build.sh), or use "
    "parallel.backend = gloo",
    "the MPI library",
    "install OpenMPI (Debian: openmpi-bin) or add the folder of the site's libmpi.so.40 to LD_LIBRARY_PATH "
    "(e.g. module load openmpi), or use parallel.backend = gloo"};

}  // namespace

std::string mpi_backend_path() { return plugin_path(kMpiPlugin); }

const MpiBackendApi& mpi_backend(const std::string& asked_for) {
  return load_plugin<MpiBackendApi>(kMpiPlugin, asked_for);
}

}  // namespace dtrain
