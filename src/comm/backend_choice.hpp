// parallel.backend: which library a job's collectives run over (Gloo, NCCL or MPI), chosen once
// from the setting, the device and the launcher, with one line naming the fix when it cannot work.
#pragma once
#include <string>

#include "comm/env.hpp"

namespace dtrain {

enum class CommBackend { gloo, nccl, mpi };
const char* comm_backend_name(CommBackend b);  // "gloo", "nccl", "mpi"

// `setting` is auto, gloo, nccl or mpi; auto is NCCL on a CUDA device, else Gloo. Error when the
// choice cannot work: nccl on the CPU, gloo or mpi on a CUDA device (they reduce host memory), mpi
// in a process no MPI launcher started (mpirun, srun --mpi=pmix).
CommBackend choose_comm_backend(const std::string& setting, bool cuda_device, const DistEnv& env);

}  // namespace dtrain
