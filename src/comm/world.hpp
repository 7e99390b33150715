// The job as this process sees it: its place (DistEnv), the store, the group of all ranks and
// the sub-groups made from it. A single process gets a world of one with no network at all.
#pragma once
#include <functional>
#include <memory>

#include "comm/backend_choice.hpp"
#include "comm/env.hpp"
#include "comm/process_group.hpp"

namespace gloo::transport {
class Device;
}

namespace dtrain {

class TcpStoreServer;
class Liveness;
struct MpiBackendApi;

class World {
 public:
  // Connects to (or, as rank 0 without dtrun, hosts) the store and forms the group of all ranks;
  // every step waits at most `timeout` for the others. Groups are made over `backend`: Gloo, or
  // MPI (the MPI runtime started here, its world ranks checked to be the launcher's); with NCCL the
  // world's own groups are Gloo's and the device's groups come through a BackendFactory.
  World(const DistEnv& env, Millis timeout, CommBackend backend = CommBackend::gloo);
  // Under MPI, finalizes it after a clean end (shutdown() passed) only: a rank that fails leaves
  // without MPI_Finalize, which would wait for every rank, and the launcher ends the others.
  ~World();

  const DistEnv& env() const { return env_; }
  CommBackend backend() const { return backend_; }
  std::string describe_backend() const;  // "Gloo", "NCCL", "MPI (Open MPI v4.1.4)"
  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  ProcessGroup& all() { return *all_; }
  Store* store() { return store_.get(); }

  // Makes a group's backend (NCCL, …) from the group's own store scope, this member's group rank,
  // the group size, the timeout and the group's name.
  using BackendFactory =
      std::function<std::unique_ptr<Backend>(Store&, int rank, int size, Millis timeout, const std::string& name)>;

  // A group of the given global ranks, over the world's backend (Gloo or MPI) unless `make` builds
  // another (a group of one rank, and so any group of a one-process world, gets the trivial backend). Collective: every rank of the world calls it
  // with the same arguments, in the same order; non-members get nullptr.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks, const std::string& name,
                                          const BackendFactory& make = nullptr);

  // Where the ranks run, e.g. "node01: ranks 0-3; node02: ranks 4-7" (collective).
  std::string layout();
  std::vector<std::string> hosts();  // every rank's host name, by rank (collective)
  // Every rank's `mine`, cut to width − 1 bytes, by rank (collective).
  std::vector<std::string> allgather_text(const std::string& mine, size_t width);

  // Waits for every rank (so rank 0's store outlives the others' last use of it).
  void shutdown();

 private:
  void start_mpi();

  DistEnv env_;
  Millis timeout_;
  CommBackend backend_;
  const MpiBackendApi* mpi_ = nullptr;  // the MPI plugin, when the groups are MPI's
  std::string mpi_version_;
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<Liveness> liveness_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<ProcessGroup> all_;
  int groups_made_ = 0;
  bool shut_ = false;
  bool ended_cleanly_ = false;  // shutdown()'s barrier passed
};

}  // namespace dtrain
