// Device mesh (see mesh.hpp).
#include "comm/mesh.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"

namespace dtrain {

namespace {

constexpr MeshDim kDims[] = {MeshDim::pp, MeshDim::dp_replicate, MeshDim::dp_shard, MeshDim::cp, MeshDim::tp};

// The member of a shape or a coordinate along d (both name their members after the dimensions).
template <class T>
auto& along(T& x, MeshDim d) {
  switch (d) {
    case MeshDim::pp: return x.pp;
    case MeshDim::dp_replicate: return x.dp_replicate;
    case MeshDim::dp_shard: return x.dp_shard;
    case MeshDim::cp: return x.cp;
    case MeshDim::tp: break;
  }
  return x.tp;
}

}  // namespace

const char* mesh_dim_name(MeshDim d) {
  switch (d) {
    case MeshDim::pp: return "pp";
    case MeshDim::dp_replicate: return "dp_replicate";
    case MeshDim::dp_shard: return "dp_shard";
    case MeshDim::cp: return "cp";
    case MeshDim::tp: return "tp";
  }
  return "?";
}

int MeshShape::extent(MeshDim d) const { return along(*this, d); }

std::string MeshShape::describe() const {
  std::string s;
  for (MeshDim d : kDims)
    if (d != MeshDim::cp || cp > 1)
      s += std::string(s.empty() ? "" : " × ") + mesh_dim_name(d) + " " + std::to_string(extent(d));
  if (ep > 1) s += ", experts over ep " + std::to_string(ep);
  return s;
}

void MeshShape::set_expert_parallel(int n) {
  require(n >= 1 && (dp_shard * cp) % n == 0,
          "parallel.ep = " + std::to_string(n) + " must divide parallel.dp_shard × parallel.cp = " +
              std::to_string(dp_shard) + " × " + std::to_string(cp) +
              ": expert parallel splits the experts over ranks that shard the data (and the sequence); "
              "raise dp_shard (or cp), or choose an ep that divides their product");
  ep = n;
}

MeshShape MeshShape::fit(int world, int pp, int dp_replicate, int dp_shard, int tp, int cp) {
  require(cp >= 1, "parallel.cp = " + std::to_string(cp) + ": give the context-parallel size, at least 1");
  MeshShape s{pp, dp_replicate, dp_shard, tp, cp};
  int fixed = 1, open = 0;
  std::string given;
  for (MeshDim d : kDims) {
    if (d == MeshDim::cp && cp == 1) continue;
    const int v = s.extent(d);
    const std::string key = std::string("parallel.") + mesh_dim_name(d);
    require(v >= 1 || v == -1, key + " = " + std::to_string(v) + ": give a size of at least 1, or -1 for what the world leaves");
    given += (given.empty() ? "" : " × ") + key + " " + (v == -1 ? "-1" : std::to_string(v));
    if (v == -1) ++open;
    else fixed *= v;
  }
  require(open <= 1, given + ": at most one of them may be -1 (what the world leaves)");
  if (open == 1) {
    require(world % fixed == 0, given + " cannot fill a world of " + std::to_string(world) + " ranks: " +
                                    std::to_string(world) + " is not a multiple of " + std::to_string(fixed) +
                                    "; choose sizes that divide the world size");
    for (MeshDim d : kDims)
      if (s.extent(d) == -1) along(s, d) = world / fixed;
  }
  require(s.size() == world, given + " = " + std::to_string(s.size()) + " ranks, but the job has " +
                                 std::to_string(world) + ": make their product the world size (or set one of them to -1)");
  return s;
}

MeshShape MeshShape::fit_elastic(int world, int pp, int dp_replicate, int dp_shard, int tp, std::string& note,
                                 int cp) {
  note.clear();
  const int given[] = {pp, dp_replicate, dp_shard, tp, cp};
  int fixed = 1, open = 0;
  for (int v : given) {
    if (v == -1) ++open;
    else if (v >= 1) fixed *= v;
  }
  const bool fits = open == 0 ? fixed == world : open == 1 && world % fixed == 0;
  // Sizes that fit, a tp or pp of "what the world leaves", or sizes fit() refuses anyway: fit's answer.
  const bool refused = dp_replicate == 0 || dp_shard == 0 || dp_replicate < -1 || dp_shard < -1 || open > 1;
  if (fits || refused || pp < 1 || tp < 1 || cp < 1) return fit(world, pp, dp_replicate, dp_shard, tp, cp);
  const int model = tp * pp * cp;
  require(world % model == 0,
          "a world of " + std::to_string(world) + " ranks no longer fits parallel.tp × parallel.cp × parallel.pp = " +
              std::to_string(tp) + " × " + std::to_string(cp) + " × " + std::to_string(pp) + " = " +
              std::to_string(model) + " ranks per model copy: give the elastic job a multiple of " +
              std::to_string(model) + " ranks at every size (dtrun --nnodes MIN:MAX × --nproc-per-node), or lower tp, cp or pp");
  // The rule: tp and pp stay (they cut the model, which must still fit a rank's memory); the
  // data-parallel ranks dp = world / (tp × pp) keep the sharding given where it still divides dp
  // (dp_shard kept, dp_replicate = dp / dp_shard; a dp_shard of -1 takes what a dp_replicate that
  // divides dp leaves), else shard over all of them (dp_shard = dp, dp_replicate = 1): fewer ranks
  // hold more of the model each, so the most sharding is the choice least likely to outgrow memory.
  MeshShape s{pp, 1, 1, tp, cp};
  const int dp = world / model;
  if (dp_shard >= 1 && dp % dp_shard == 0) {
    s.dp_shard = dp_shard;
    s.dp_replicate = dp / dp_shard;
  } else if (dp_shard == -1 && dp_replicate >= 1 && dp % dp_replicate == 0) {
    s.dp_replicate = dp_replicate;
    s.dp_shard = dp / dp_replicate;
  } else {
    s.dp_shard = dp;
  }
  auto size = [](int v) { return v == -1 ? std::string("-1") : std::to_string(v); };
  note = "elastic job: parallel.* asked for pp " + size(pp) + " × dp_replicate " + size(dp_replicate) +
         " × dp_shard " + size(dp_shard) + (cp > 1 ? " × cp " + size(cp) : std::string()) + " × tp " + size(tp) + ", which does not make this world of " +
         std::to_string(world) + " ranks: running as " + s.describe();
  return s;
}

int MeshCoord::at(MeshDim d) const { return along(*this, d); }

MeshCoord mesh_coord(const MeshShape& s, int rank) {
  MeshCoord c;
  c.tp = rank % s.tp;
  rank /= s.tp;
  c.cp = rank % s.cp;
  rank /= s.cp;
  c.dp_shard = rank % s.dp_shard;
  rank /= s.dp_shard;
  c.dp_replicate = rank % s.dp_replicate;
  c.pp = rank / s.dp_replicate;
  return c;
}

int mesh_rank(const MeshShape& s, const MeshCoord& c) {
  return (((c.pp * s.dp_replicate + c.dp_replicate) * s.dp_shard + c.dp_shard) * s.cp + c.cp) * s.tp + c.tp;
}

std::vector<int> mesh_group(const MeshShape& s, int rank, const std::vector<MeshDim>& dims) {
  int n = 1;
  for (MeshDim d : dims) n *= s.extent(d);
  std::vector<int> out;
  MeshCoord c = mesh_coord(s, rank);
  for (int i = 0; i < n; ++i) {
    int rest = i;
    for (auto d = dims.rbegin(); d != dims.rend(); ++d) {  // the last dimension fastest
      along(c, *d) = rest % s.extent(*d);
      rest /= s.extent(*d);
    }
    out.push_back(mesh_rank(s, c));
  }
  return out;
}

std::vector<std::vector<int>> mesh_groups(const MeshShape& s, const std::vector<MeshDim>& dims) {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < s.size(); ++r) {
    std::vector<int> g = mesh_group(s, r, dims);
    if (g.front() == r) out.push_back(std::move(g));
  }
  return out;
}

DeviceMesh::DeviceMesh(const MeshShape& shape, int rank, const DimGroup& by_dims, const ExpertGroupOf& by_expert)
    : shape_(shape), coord_(mesh_coord(shape, rank)) {
  for (MeshDim d : kDims) groups_[size_t(d)] = by_dims({d}, mesh_dim_name(d));
  dp_ = shape.dp_shard == 1   ? groups_[size_t(MeshDim::dp_replicate)]
        : shape.dp_replicate == 1 ? groups_[size_t(MeshDim::dp_shard)]
                                  : by_dims({MeshDim::dp_replicate, MeshDim::dp_shard}, "dp");
  const auto& cp = groups_[size_t(MeshDim::cp)];
  shard_ = shape.cp == 1 ? groups_[size_t(MeshDim::dp_shard)]
           : shape.dp_shard == 1 ? cp
                                 : by_dims({MeshDim::dp_shard, MeshDim::cp}, "dp_shard_cp");
  dp_cp_ = shape.cp == 1    ? dp_
           : shape.dp() == 1 ? cp
           : shape.dp_replicate == 1 ? shard_
                                     : by_dims({MeshDim::dp_replicate, MeshDim::dp_shard, MeshDim::cp}, "dp_cp");
  if (shape_.ep == 1) {
    expert_shard_ = shard_;
    expert_replicas_ = dp_cp_;
    return;
  }
  ep_ = by_expert(ExpertGroup::ep, "ep");
  expert_shard_ = by_expert(ExpertGroup::shard, "expert_shard");
  expert_replicas_ = by_expert(ExpertGroup::replicas, "expert_replicas");
}

DeviceMesh::DeviceMesh(World& world, const MeshShape& shape, const World::BackendFactory& backend)
    : DeviceMesh(
          shape, world.rank(),
          // Every rank walks every group in the same order (World::new_group is collective).
          [&](const std::vector<MeshDim>& dims, const std::string& name) {
            std::vector<int> everyone;
            for (int r = 0; r < world.size(); ++r) everyone.push_back(r);
            std::shared_ptr<ProcessGroup> mine;
            for (const auto& members : mesh_groups(shape, dims)) {
              std::shared_ptr<ProcessGroup> g;
              if (!backend && members == everyone)
                g = std::shared_ptr<ProcessGroup>(&world.all(), [](ProcessGroup*) {});
              else
                g = world.new_group(members, name, backend);
              if (g) mine = g;
            }
            DT_ASSERT(mine);
            return mine;
          },
          [&](ExpertGroup which, const std::string& name) {
            std::shared_ptr<ProcessGroup> mine;
            for (int r = 0; r < shape.size(); ++r) {
              const std::vector<int> members = expert_group(shape, r, which);
              if (members.front() != r) continue;  // made with its first member
              std::shared_ptr<ProcessGroup> g = world.new_group(members, name, backend);
              if (g) mine = g;
            }
            DT_ASSERT(mine);
            return mine;
          }) {
  DT_ASSERT(shape.size() == world.size());
}

namespace {

// A planner's operation's place on its clock: issued at the compute stream's time, starting when the
// backend has placed it after the group's operation before it, taking what the clock says.
class StandInOrder : public StreamOrder {
 public:
  StandInOrder(StandInClock* clock, std::string group) : clock_(clock), group_(std::move(group)), issued(clock->now()) {}
  bool finished() override { return true; }
  void wait_on_compute() override { clock_->wait_until(start, took, group_); }

 private:
  StandInClock* clock_;
  std::string group_;

 public:
  const double issued;
  double start = 0.0;  // set by the backend when it runs the operation
  OpSeconds took;
};

// A planner's backend: moves no data, every operation done at once; with a clock, each one timed.
class StandInBackend : public Backend {
 public:
  StandInBackend(StandInClock* clock, std::string group, std::vector<int> ranks)
      : clock_(clock), group_(std::move(group)), ranks_(std::move(ranks)) {}
  bool instant() const override { return true; }
  std::shared_ptr<StreamOrder> mark_issue() override {
    return clock_ ? std::make_shared<StandInOrder>(clock_, group_) : nullptr;
  }
  void use_order(std::shared_ptr<StreamOrder> order) override { order_ = std::static_pointer_cast<StandInOrder>(order); }
  void allreduce(void*, size_t n, ElemType t, ReduceOp) override { timed("allreduce", n * elem_size(t)); }
  void allgather(const void*, void*, const std::vector<size_t>& counts, ElemType t) override {
    timed("allgather", total(counts) * elem_size(t));
  }
  void reduce_scatter(const void*, void*, const std::vector<size_t>& counts, ElemType t, ReduceOp) override {
    timed("reduce_scatter", total(counts) * elem_size(t));
  }
  void broadcast(void*, size_t n, ElemType t, int) override { timed("broadcast", n * elem_size(t)); }
  // Equal shares (counts ahead of rows: host memory): every rank is taken to send what this one does,
  // so each block comes back as this rank sent it.
  void all_to_all(const void* in, void* out, size_t n, ElemType t) override {
    if (n) std::memmove(out, in, n * ranks_.size() * elem_size(t));
    timed("all_to_all", n * ranks_.size() * elem_size(t));
  }
  void all_to_all_v(const void*, const std::vector<size_t>& send, void*, const std::vector<size_t>&, ElemType t) override {
    timed("all_to_all", total(send) * elem_size(t));
  }
  std::function<void()> post_send(const void*, size_t bytes, int, uint32_t) override {
    timed("send", bytes, Direction::out);
    return [] {};
  }
  std::function<void()> post_recv(void*, size_t bytes, int, uint32_t) override {
    timed("recv", bytes, Direction::in);
    return [] {};
  }
  void barrier() override { timed("barrier", 0); }

 private:
  static size_t total(const std::vector<size_t>& counts) {
    size_t n = 0;
    for (size_t c : counts) n += c;
    return n;
  }
  // A send uses the link's way out, a receive its way in (both at once: the link is duplex), a
  // collective both.
  enum class Direction { out, in, both };
  void timed(const char* op, size_t bytes, Direction d = Direction::both) {
    if (!clock_ || !order_) return;
    order_->took = clock_->seconds(op, double(bytes), ranks_, group_);
    const double free_at = d == Direction::out ? free_out_ : d == Direction::in ? free_in_ : std::max(free_out_, free_in_);
    order_->start = std::max(order_->issued + order_->took.lag, free_at);
    const double end = order_->start + order_->took.beside;
    if (d != Direction::in) free_out_ = end;
    if (d != Direction::out) free_in_ = end;
    order_.reset();
  }

  StandInClock* clock_;
  std::string group_;
  std::vector<int> ranks_;
  std::shared_ptr<StandInOrder> order_;
  double free_out_ = 0.0, free_in_ = 0.0;  // when the group's last operation each way ends
};

}  // namespace

std::unique_ptr<DeviceMesh> DeviceMesh::stand_in(const MeshShape& shape, int rank, StandInClock* clock) {
  auto group = [rank, clock](std::vector<int> members, const std::string& name) {
    const int me = int(std::find(members.begin(), members.end(), rank) - members.begin());
    auto backend = std::make_unique<StandInBackend>(clock, name, members);
    return std::make_shared<ProcessGroup>(name, std::move(members), me, Millis(60000), nullptr, std::move(backend));
  };
  return std::unique_ptr<DeviceMesh>(new DeviceMesh(
      shape, rank,
      [&](const std::vector<MeshDim>& dims, const std::string& name) { return group(mesh_group(shape, rank, dims), name); },
      [&](ExpertGroup which, const std::string& name) { return group(expert_group(shape, rank, which), name); }));
}

std::vector<int> expert_group(const MeshShape& s, int rank, ExpertGroup which) {
  // the members agree with `rank` on pp, tp and on what `which` keeps of its place in dp_shard × cp
  // (its run of ep ranks, its index in the run) and dp_replicate
  const MeshCoord me = mesh_coord(s, rank);
  auto same = [&](const MeshCoord& c) {
    if (c.pp != me.pp || c.tp != me.tp) return false;
    const bool run = c.shard_index(s) / s.ep == me.shard_index(s) / s.ep, index = c.ep_index(s) == me.ep_index(s);
    switch (which) {
      case ExpertGroup::ep: return run && c.dp_replicate == me.dp_replicate;
      case ExpertGroup::shard: return index && c.dp_replicate == me.dp_replicate;
      case ExpertGroup::replicas: return index;
    }
    return false;
  };
  std::vector<int> out;
  for (int r = 0; r < s.size(); ++r)
    if (same(mesh_coord(s, r))) out.push_back(r);
  return out;
}

size_t DeviceMesh::buffer_bytes() const {
  std::vector<const ProcessGroup*> seen;
  size_t n = 0;
  for (const ProcessGroup* g : {groups_[0].get(), groups_[1].get(), groups_[2].get(), groups_[3].get(),
                                groups_[4].get(), dp_.get(), dp_cp_.get(), shard_.get(), ep_.get(),
                                expert_shard_.get(), expert_replicas_.get()})
    if (g && std::find(seen.begin(), seen.end(), g) == seen.end()) {
      seen.push_back(g);
      n += g->buffer_bytes();
    }
  return n;
}

std::string DeviceMesh::placement(int max_ranks) const {
  std::string s;
  const int shown = std::min(shape_.size(), max_ranks);
  for (int r = 0; r < shown; ++r) {
    const MeshCoord c = mesh_coord(shape_, r);
    s += (r ? "; rank " : "rank ") + std::to_string(r) + ":";
    for (MeshDim d : kDims)
      if (d != MeshDim::cp || shape_.cp > 1)
        s += std::string(d == MeshDim::pp ? " " : ", ") + mesh_dim_name(d) + " " + std::to_string(c.at(d));
  }
  if (shown < shape_.size()) s += "; … and " + std::to_string(shape_.size() - shown) + " more";
  return s;
}

}  // namespace dtrain
