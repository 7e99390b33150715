// parallel.backend (see backend_choice.hpp).
#include "comm/backend_choice.hpp"

#include "core/error.hpp"

namespace dtrain {

const char* comm_backend_name(CommBackend b) {
  switch (b) {
    case CommBackend::gloo: return "gloo";
    case CommBackend::nccl: return "nccl";
    case CommBackend::mpi: return "mpi";
  }
  return "?";
}

CommBackend choose_comm_backend(const std::string& setting, bool cuda_device, const DistEnv& env) {
  if (setting == "auto") return cuda_device ? CommBackend::nccl : CommBackend::gloo;
  if (setting == "nccl") {
    require(cuda_device, "parallel.backend = nccl needs a CUDA device (train.device = cuda): on the CPU use gloo "
                         "or mpi (auto picks gloo)");
    return CommBackend::nccl;
  }
  require(setting == "gloo" || setting == "mpi",
          "parallel.backend = \"" + setting + "\" is not one of auto, gloo, nccl, mpi: pick one of them");
  require(!cuda_device, "parallel.backend = " + setting + " reduces host memory and cannot serve a GPU (train.device "
                            "= cuda, or auto on a node with GPUs): use nccl (or auto) on GPUs, or train.device = cpu");
  if (setting == "gloo") return CommBackend::gloo;
  require(env.mpi_launched, "parallel.backend = mpi needs ranks that an MPI launcher started, and this process was "
                            "started " + std::string(env.launcher == "single process" ? "alone" : "by " + env.launcher) +
                                ": launch with `mpirun -np N dtrain train ...` or `srun --mpi=pmix dtrain train ...`, "
                                "or use parallel.backend = gloo");
  return CommBackend::mpi;
}

}  // namespace dtrain
