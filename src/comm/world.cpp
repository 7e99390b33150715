// World (see world.hpp): store, liveness, Gloo device and groups.
#include "comm/world.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "core/descriptors.hpp"
#include "core/error.hpp"
#include "core/host_name.hpp"
#include "comm/file_store.hpp"
#include "comm/gloo_backend.hpp"
#include "comm/liveness.hpp"
#include "comm/mpi_plugin.hpp"
#include "comm/socket.hpp"
#include "comm/tcp_store.hpp"

namespace dtrain {

namespace {

// The backend of a group of one: every collective is the identity (or a copy).
class SelfBackend : public Backend {
 public:
  void allreduce(void*, size_t, ElemType, ReduceOp) override {}
  void allgather(const void* in, void* out, const std::vector<size_t>& counts, ElemType t) override {
    if (in != out) std::memmove(out, in, counts[0] * elem_size(t));
  }
  void reduce_scatter(const void* in, void* out, const std::vector<size_t>& counts, ElemType t, ReduceOp) override {
    if (in != out) std::memmove(out, in, counts[0] * elem_size(t));
  }
  void broadcast(void*, size_t, ElemType, int) override {}
  void all_to_all(const void* in, void* out, size_t n, ElemType t) override {
    if (n) std::memcpy(out, in, n * elem_size(t));
  }
  void all_to_all_v(const void* in, const std::vector<size_t>& send_counts, void* out, const std::vector<size_t>&,
                    ElemType t) override {
    if (send_counts[0]) std::memcpy(out, in, send_counts[0] * elem_size(t));  // the group checked recv_counts[0]
  }
  std::function<void()> post_send(const void*, size_t, int, uint32_t) override { DT_ASSERT(false); }
  std::function<void()> post_recv(void*, size_t, int, uint32_t) override { DT_ASSERT(false); }
  void barrier() override {}
};

std::string list_ranks(const std::vector<std::string>& missing_keys) {
  std::string s;
  for (const auto& k : missing_keys) s += (s.empty() ? "" : ", ") + k.substr(k.rfind('/') + 1);
  return s;
}

}  // namespace

World::World(const DistEnv& env, Millis timeout, CommBackend backend)
    : env_(env), timeout_(clamp_wait(timeout)), backend_(backend) {
  std::vector<int> everyone(size_t(env.world_size));
  for (int i = 0; i < env.world_size; ++i) everyone[size_t(i)] = i;
  if (!env.distributed()) {
    all_ = std::make_shared<ProcessGroup>("world", everyone, 0, timeout_, nullptr, std::make_unique<SelfBackend>());
    return;
  }
  if (backend == CommBackend::mpi) start_mpi();
  // A peer that dies closes its sockets; writing to one must become an error we can explain
  // ("rank N stopped"), not a SIGPIPE that kills this rank too. Left alone if the program set it.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  std::string address;
  if (!env.store_dir.empty()) {
    store_ = std::make_shared<FileStore>(env.store_dir, env.token);
    // No store connection shows our address. Gloo resolves a host name it is given without
    // checking the lookup (an unresolvable one crashes it), so hand it an address.
    if (env.socket_ifname.empty()) address = address_for_peers(host_name(), env.local_world_size >= env.world_size);
  } else {
    if (!env.agent_store && env.rank == 0) {
      // Where MASTER_ADDR points, not every address (all of them when that is not this machine)
      server_ = std::make_unique<TcpStoreServer>(
          listen_address(env.master_addr, env.local_world_size >= env.world_size, "MASTER_ADDR"), env.master_port,
          env.token);
      // It accepts every rank's two connections (store, heartbeat), its own among them: short of
      // descriptors for those, the job would hang instead of failing.
      require_free_descriptors(2 * env.world_size + 2, "rank 0 cannot host the store for " +
                                                           std::to_string(env.world_size) + " ranks");
    }
    auto tcp = std::make_shared<TcpStore>(env.master_addr, env.master_port, env.token, timeout_);
    address = tcp->local_address();
    store_ = tcp;
  }
  if (!env.store_prefix.empty()) store_ = std::make_shared<PrefixStore>(store_, env.store_prefix);
  liveness_ = std::make_shared<Liveness>(store_->clone(), env.rank);
  if (!mpi_) device_ = make_gloo_device(address, env.socket_ifname);
  all_ = new_group(everyone, "world");
}

void World::start_mpi() {
  mpi_ = &mpi_backend("parallel.backend = mpi");
  int rank = -1, size = 0;
  mpi_->init(&rank, &size, &mpi_version_);
  require(rank == env_.rank && size == env_.world_size,
          "parallel.backend = mpi: MPI_COMM_WORLD makes this process rank " + std::to_string(rank) + " of " +
              std::to_string(size) + ", but " + env_.launcher + " says rank " + std::to_string(env_.rank) + " of " +
              std::to_string(env_.world_size) +
              ": start every rank with the MPI launcher itself (mpirun -np N dtrain ..., srun --mpi=pmix dtrain ...), "
              "not through dtrun or a script that starts several");
}

World::~World() {
  all_.reset();  // joins the communication thread before the device and store go
  if (mpi_ && ended_cleanly_) mpi_->finalize();  // now, or when the last group elsewhere is freed
}

std::string World::describe_backend() const {
  switch (backend_) {
    case CommBackend::gloo: return "Gloo";
    case CommBackend::nccl: return "NCCL";
    case CommBackend::mpi: break;
  }
  return mpi_version_.empty() ? "MPI" : "MPI (" + mpi_version_ + ")";
}

std::shared_ptr<ProcessGroup> World::new_group(const std::vector<int>& ranks, const std::string& name,
                                               const BackendFactory& make) {
  const int id = groups_made_++;
  int me = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    require(ranks[i] >= 0 && ranks[i] < size(), "process group '" + name + "' names rank " +
                                                    std::to_string(ranks[i]) + ", outside the world of " +
                                                    std::to_string(size()));
    if (ranks[i] == rank()) me = int(i);
  }
  if (me < 0) return nullptr;
  if (!env_.distributed() || ranks.size() == 1) {  // a group of one needs no connection
    return std::make_shared<ProcessGroup>(name, ranks, 0, timeout_, nullptr, std::make_unique<SelfBackend>());
  }
  PrefixStore gs(store_, "pg/" + std::to_string(id) + "." + name + "/");
  // Join first, so that a rank that never comes is named instead of a Gloo key.
  gs.set("join/" + std::to_string(rank()), "1");
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back("join/" + std::to_string(r));
  auto missing = gs.wait(keys, timeout_);
  require(missing.empty(), "process group '" + name + "' (" + std::to_string(ranks.size()) + " ranks) setup: rank(s) " +
                               list_ranks(missing) + " did not join within " + std::to_string(timeout_.count() / 1000) +
                               " s (not started, crashed before joining, or on a node that cannot reach the store)");
  auto backend = make ? make(gs, me, int(ranks.size()), timeout_, name)
                 : mpi_ ? mpi_->connect(ranks, id, name)
                        : connect_gloo(gs, me, int(ranks.size()), device_, timeout_, name);
  return std::make_shared<ProcessGroup>(name, ranks, me, timeout_, liveness_, std::move(backend));
}

std::vector<std::string> World::allgather_text(const std::string& mine, size_t width) {
  const size_t words = (width + 3) / 4;  // gathered as 32-bit words
  std::vector<char> own(words * 4, 0), all(words * 4 * size_t(size()));
  mine.substr(0, words * 4 - 1).copy(own.data(), words * 4 - 1);
  all_->allgather(own.data(), all.data(), words, ElemType::i32);
  std::vector<std::string> out;
  for (int r = 0; r < size(); ++r) out.emplace_back(all.data() + size_t(r) * words * 4);
  return out;
}

std::vector<std::string> World::hosts() { return allgather_text(host_name(), 64); }

std::string World::layout() {
  const std::vector<std::string> names = hosts();
  std::string out;
  std::string host;
  int first = 0;
  auto flush = [&](int last) {
    if (host.empty()) return;
    out += (out.empty() ? "" : "; ") + host + ": rank" + (first == last ? " " + std::to_string(first)
                                                                         : "s " + std::to_string(first) + "-" + std::to_string(last));
  };
  for (int r = 0; r < size(); ++r) {
    const std::string& h = names[size_t(r)];
    if (h != host) {
      flush(r - 1);
      host = h;
      first = r;
    }
  }
  flush(size() - 1);
  return out;
}

void World::shutdown() {
  if (shut_) return;
  shut_ = true;
  if (env_.distributed()) all_->barrier();
  ended_cleanly_ = true;
}

}  // namespace dtrain
