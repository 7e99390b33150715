// The MPI backend plugin's one exported symbol (comm/mpi_plugin.hpp): the MPI runtime and its
// process groups, as the programs find them when parallel.backend = mpi.
#include "comm/mpi/mpi_backend.hpp"
#include "comm/mpi_plugin.hpp"

#ifndef DTRAIN_BUILD_ID
#error "the MPI plugin needs DTRAIN_BUILD_ID (set by CMake) to be checked against the programs that load it"
#endif

namespace dtrain {
namespace {

const MpiBackendApi kApi{DTRAIN_BUILD_ID, &mpi_init, &mpi_connect, &mpi_finalize};

}  // namespace
}  // namespace dtrain

extern "C" __attribute__((visibility("default"))) const dtrain::MpiBackendApi* dtrain_mpi_backend() {
  return &dtrain::kApi;
}
