// An elastic job's side of the trainer (dtrun --nnodes MIN:MAX): the metrics record a run restarted
// on other nodes writes, and the check after each checkpoint whether nodes wait to join.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>

#include "core/json.hpp"

namespace dtrain {

class World;

// The `membership` record of metrics.jsonl when dtrun restarted the job on other nodes
// (DTRAIN_MEMBERSHIP: what changed): nodes, world, the step it goes on from, the change; nullopt
// when the nodes are those of the run before.
std::optional<Json> membership_record(const World& world, int64_t step);

class Store;

// Whether dtrun asks the job to stop so that waiting nodes can join (its store's new_nodes key, read
// by rank 0; a one-rank world, which has no store of its own, connects to dtrun's).
class NewNodesWatch {
 public:
  explicit NewNodesWatch(World& world);
  ~NewNodesWatch();
  // Collective over every rank, after a checkpoint. False outside elastic jobs.
  bool asked();

 private:
  World& world_;
  std::shared_ptr<Store> own_;  // the connection of a one-rank world
};

// Thrown by every rank at the same checkpoint when NewNodesWatch::asked; dtrain then exits with
// kExitForNewNodes and dtrun restarts the job with the new nodes.
struct StopForNewNodes : std::exception {
  int64_t step = 0;  // of the checkpoint the job goes on from
  explicit StopForNewNodes(int64_t s) : step(s) {}
  const char* what() const noexcept override { return "stopping for nodes that wait to join"; }
};

}  // namespace dtrain
