// The CPU backend over MPI, inside the MPI plugin (programs reach it through comm/mpi_plugin.hpp):
// the MPI runtime (initialised with MPI_THREAD_MULTIPLE, finalized after its last communicator) and
// one communicator per process group.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.hpp"

namespace dtrain {

// See MpiBackendApi (comm/mpi_plugin.hpp) for each.
void mpi_init(int* rank, int* size, std::string* version);
std::unique_ptr<Backend> mpi_connect(const std::vector<int>& ranks, int tag, const std::string& group_name);
void mpi_finalize();

}  // namespace dtrain
