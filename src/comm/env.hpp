// Where this process sits in the job, read from the launcher's environment: dtrun (and torchrun's
// variable names), SLURM's srun, or OpenMPI's mpirun. No variables: a single process.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace dtrain {

struct DistEnv {
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string token;          // DTRAIN_JOB_TOKEN (or one derived from the launcher's job id)
  std::string launcher = "single process";  // "dtrun", "torchrun-style variables", "SLURM", "OpenMPI"
  bool agent_store = false;   // dtrun hosts the store; every rank is a client
  std::string store_prefix;   // DTRAIN_STORE_PREFIX: dtrun's rendezvous round
  std::string store_dir;      // DTRAIN_STORE_DIR: use a file store in this shared folder
  std::string socket_ifname;  // DTRAIN_SOCKET_IFNAME (or GLOO_SOCKET_IFNAME)
  int restart_count = 0;      // DTRAIN_RESTART_COUNT: >0 after dtrun restarted the workers
  // DTRAIN_ELASTIC=MIN:MAX: an elastic job (dtrun --nnodes MIN:MAX), whose world may change size
  // between restarts; the mesh then shrinks or grows its data-parallel dimensions to fit.
  bool elastic = false;
  std::string elastic_nodes;  // "MIN:MAX" as dtrun gave it ("" when not elastic)
  int elastic_min = 0, elastic_max = 0;  // MIN and MAX
  bool mpi_launched = false;  // started by an MPI launcher: mpirun (OMPI_COMM_WORLD_SIZE) or PMIx (PMIX_RANK)
  bool distributed() const { return world_size > 1; }
  std::string describe() const;  // "rank 3 of 8 (local 1 of 4, node 1) via SLURM"
};

using GetEnv = std::function<const char*(const char*)>;
// Reads the variables through `get` (default: the process environment); throws naming the
// variable when one is malformed or inconsistent.
DistEnv detect_env(const GetEnv& get = nullptr);

// SLURM host lists: "gpu[01-03,07],login1" → gpu01 gpu02 gpu03 gpu07 login1 (zero padding kept).
std::vector<std::string> expand_slurm_nodelist(const std::string& list);

}  // namespace dtrain
