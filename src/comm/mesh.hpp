// The device mesh: the job's ranks laid out as pp × dp_replicate × dp_shard × cp × tp (tp varies
// fastest, then cp, so a tensor-parallel group, and a context-parallel one where it fits, stays
// inside a node), with the process group of every line of ranks along each dimension, and of data
// parallelism as a whole, built once; and expert parallel's groups, which fold into dp_shard × cp.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/world.hpp"

namespace dtrain {

enum class MeshDim { pp, dp_replicate, dp_shard, cp, tp };
const char* mesh_dim_name(MeshDim d);  // "pp", "dp_replicate", "dp_shard", "cp", "tp"

// (cp is declared last so that {pp, dp_replicate, dp_shard, tp} still initialises a shape of cp 1.)
// ep is not a dimension of its own: the dp_shard × cp ranks (numbered dp_shard · cp + cp) are cut into
// runs of ep consecutive ranks, each run splitting the experts between its ranks.
struct MeshShape {
  int pp = 1, dp_replicate = 1, dp_shard = 1, tp = 1, cp = 1;
  int ep = 1;
  int size() const { return pp * dp_replicate * dp_shard * cp * tp; }
  int dp() const { return dp_replicate * dp_shard; }  // ranks that split the batch
  int extent(MeshDim d) const;
  // "pp 1 × dp_replicate 2 × dp_shard 2 × tp 1" (with "× cp N" before tp when cp > 1, and ", experts
  // over ep N" after when ep > 1)
  std::string describe() const;
  // Sets ep: ConfigError unless it is at least 1 and divides dp_shard × cp.
  void set_expert_parallel(int ep);

  // The shape of `world` ranks from the configured sizes, each ≥ 1 or -1 (whatever the world leaves;
  // at most one; cp ≥ 1). Error naming the numbers and the fix when they do not make the world size.
  static MeshShape fit(int world, int pp, int dp_replicate, int dp_shard, int tp, int cp = 1);
  // The same for an elastic job (dtrun --nnodes MIN:MAX), whose world may have shrunk or grown
  // since the sizes were chosen: sizes that still make the world are kept; otherwise tp, cp and pp
  // are kept and the data-parallel dimensions take what the world leaves (see mesh.cpp for the
  // rule), and `note` says what the job runs as ("" when the sizes fitted). Error when the world is
  // not a multiple of tp × cp × pp.
  static MeshShape fit_elastic(int world, int pp, int dp_replicate, int dp_shard, int tp, std::string& note,
                               int cp = 1);
};

struct MeshCoord {
  int pp = 0, dp_replicate = 0, dp_shard = 0, tp = 0, cp = 0;
  int at(MeshDim d) const;
  int dp_index(const MeshShape& s) const { return dp_replicate * s.dp_shard + dp_shard; }  // 0..dp-1
  int shard_index(const MeshShape& s) const { return dp_shard * s.cp + cp; }                // 0..dp_shard·cp-1
  int ep_index(const MeshShape& s) const { return shard_index(s) % s.ep; }  // which share of the experts it holds
};

MeshCoord mesh_coord(const MeshShape& s, int rank);
int mesh_rank(const MeshShape& s, const MeshCoord& c);

// The ranks that share every coordinate with `rank` but those along `dims` (listed outermost first),
// ordered by those coordinates, the last dimension fastest.
std::vector<int> mesh_group(const MeshShape& s, int rank, const std::vector<MeshDim>& dims);
// Every such group once, in the order of their smallest rank.
std::vector<std::vector<int>> mesh_groups(const MeshShape& s, const std::vector<MeshDim>& dims);

// Expert parallel's groups (ep > 1): the ep ranks of a run of dp_shard × cp that split the experts;
// the ranks of the same dp_shard × cp and dp_replicate holding the same experts (FSDP shards those
// experts over them); and all the ranks holding the same experts (they reduce their gradients).
enum class ExpertGroup { ep, shard, replicas };
// `rank`'s group of that kind, in rank order.
std::vector<int> expert_group(const MeshShape& s, int rank, ExpertGroup which);

// The planner's clock for a stand-in mesh's operations (DeviceMesh::stand_in): the compute stream's
// time an operation is issued at, what it costs on its group, and the compute stream waiting for it.
// An operation starts when it is issued and its group's previous one has finished.
// An operation's seconds: `alone` while this rank computes nothing beside it, `beside` while it does
// (a CPU node's communication shares the computation's cores: slower there; elsewhere the same);
// `lag`: how long after this rank issues it the slowest of the group's ranks comes to it.
// An operation's seconds on its own (the rank waiting for it) and beside the rank's computation, the
// slowest of its ranks' lag in reaching it, and the seconds of computation it takes when all of it
// runs beside one (its threads on the same cores).
struct OpSeconds {
  double alone = 0.0, beside = 0.0, lag = 0.0, steal = 0.0;
};

class StandInClock {
 public:
  virtual ~StandInClock() = default;
  virtual double now() = 0;  // the compute stream's time, seconds (called on the issuing thread)
  // Seconds of one operation (`op`: "allreduce", "allgather", "reduce_scatter", "broadcast",
  // "all_to_all", "send", "recv", "barrier"), `bytes` this rank's side, over group `group` of `ranks`
  // (called on the group's communication thread as the operation runs).
  virtual OpSeconds seconds(const std::string& op, double bytes, const std::vector<int>& ranks,
                            const std::string& group) = 0;
  // The compute stream waits (on the waiting thread) for an operation of group `group` that started
  // at `start` and takes `s` (the group's next one starts `s.beside` after it).
  virtual void wait_until(double start, const OpSeconds& s, const std::string& group) = 0;
};

class DeviceMesh {
 public:
  // Collective: every rank of `world` calls it with the same shape. Groups are made with `backend`
  // (Gloo when null); a group of one rank needs no connection, and where a group is the whole world
  // over Gloo, the world's own group serves.
  DeviceMesh(World& world, const MeshShape& shape, const World::BackendFactory& backend = nullptr);
  // A planner's mesh (`dtrain plan`): rank `rank`'s groups of `shape` alone, each over a backend that
  // moves no data (every operation returns at once, leaving its buffers as they were), so that one
  // process can build any rank's parts as a run builds them, without the other ranks.
  // `clock` (optional, outliving the mesh) times every operation as the planner's model says.
  static std::unique_ptr<DeviceMesh> stand_in(const MeshShape& shape, int rank, StandInClock* clock = nullptr);

  const MeshShape& shape() const { return shape_; }
  const MeshCoord& coord() const { return coord_; }
  ProcessGroup& group(MeshDim d) { return *groups_[size_t(d)]; }
  ProcessGroup& dp() { return *dp_; }  // dp_replicate × dp_shard: the ranks that split the batch
  // dp_replicate × dp_shard × cp: the ranks that hold the same parameters and reduce their gradients
  // together (context-parallel ranks see the same samples, each a share of the positions).
  ProcessGroup& dp_cp() { return *dp_cp_; }
  // dp_shard × cp: the ranks FSDP shards the parameters over.
  ProcessGroup& shard() { return *shard_; }
  // Expert parallel: the ep ranks that split the experts between them (tokens travel among them);
  // the ranks of shard() that hold the same experts (FSDP shards the experts over them); and those
  // of dp_cp() (they reduce the experts' gradients together). Without ep, the groups of one rank, shard()
  // and dp_cp(). (ep(): only when ep > 1.)
  ProcessGroup& ep() { return *ep_; }
  ProcessGroup& expert_shard() { return *expert_shard_; }
  ProcessGroup& expert_replicas() { return *expert_replicas_; }
  // Host bytes its groups' backends keep between operations (each group counted once).
  size_t buffer_bytes() const;

  // "rank 0: pp 0, dp_replicate 0, dp_shard 0, tp 0; rank 1: …" for the first `max_ranks` ranks
  // (then "… and N more"); any rank knows every rank's place.
  std::string placement(int max_ranks = 1 << 30) const;

 private:
  // This rank's group along some dimensions, or of expert parallel's kind.
  using DimGroup = std::function<std::shared_ptr<ProcessGroup>(const std::vector<MeshDim>&, const std::string&)>;
  using ExpertGroupOf = std::function<std::shared_ptr<ProcessGroup>(ExpertGroup, const std::string&)>;
  DeviceMesh(const MeshShape& shape, int rank, const DimGroup& by_dims, const ExpertGroupOf& by_expert);

  MeshShape shape_;
  MeshCoord coord_;
  std::shared_ptr<ProcessGroup> groups_[5];
  std::shared_ptr<ProcessGroup> dp_, dp_cp_, shard_;
  std::shared_ptr<ProcessGroup> ep_, expert_shard_, expert_replicas_;
};

}  // namespace dtrain
