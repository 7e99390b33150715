// The MPI backend is a plugin, lib/libdtrain_mpi.so, opened only when parallel.backend = mpi: the
// programs link no MPI library, so one build (one bundle) runs where MPI is not installed, and under
// mpirun or srun --mpi=pmix the plugin uses the node's own libmpi (OpenMPI's soname libmpi.so.40).
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace dtrain {

class Backend;

// What the plugin provides (src/comm/mpi/plugin.cpp fills it).
struct MpiBackendApi {
  const char* build_id;  // DTRAIN_BUILD_ID of the build that made it: must be this program's
  // MPI_Init_thread asking for MPI_THREAD_MULTIPLE (once per process; Error when the library gives
  // less): this process's rank and the size of MPI_COMM_WORLD, and the library's version line.
  void (*init)(int* rank, int* size, std::string* version);
  // The backend of a group of MPI_COMM_WORLD's ranks `ranks` (group rank = index) over a communicator
  // of its own, made by the members alone (MPI_Comm_create_group with `tag`, which every member
  // passes alike). Collective over the members, in the same order on each.
  std::unique_ptr<Backend> (*connect)(const std::vector<int>& ranks, int tag, const std::string& group_name);
  // MPI_Finalize, once every communicator is freed (now, if none is left). Only at a clean end of
  // the job: MPI_Finalize waits for every rank, so a rank that failed must leave without it.
  void (*finalize)();
};

// The name the plugin exports its MpiBackendApi under (a function returning a pointer to it).
inline constexpr const char* kMpiBackendEntry = "dtrain_mpi_backend";

// Where the plugin is: $DTRAIN_MPI_PLUGIN, else lib/libdtrain_mpi.so beside this program's bin/, else
// beside the program; "" when there is none (a build without MPI).
std::string mpi_backend_path();

// The plugin, opened on first use. Error (one line: what failed to load, and the fix) when this
// build has none or it cannot be loaded; `asked_for` says what wanted it.
const MpiBackendApi& mpi_backend(const std::string& asked_for);

}  // namespace dtrain
