// MPI backend (see mpi_backend.hpp). Collectives are MPI's blocking ones (OpenMPI's tuned
// algorithms; its non-blocking ones measured 2–5× slower here), with errors returned, not fatal,
// but for reduce-scatter, the ring the Gloo backend runs; bf16 reduces through user-defined ops with
// the arithmetic of comm/reduce_math.hpp, and avg is a sum scaled afterwards, so the results are
// Gloo's. Send and receive post MPI_Isend / MPI_Irecv
// and wait on the waiting thread. MPI cannot cancel an operation: the group's watchdog ends the job
// (abort_job: MPI_Abort) when one outlives the timeout.
#include "comm/mpi/mpi_backend.hpp"

#include <mpi.h>
#include <signal.h>

#include <climits>
#include <cstring>
#include <mutex>

#include "comm/reduce_math.hpp"
#include "core/error.hpp"

namespace dtrain {

namespace {

// The process's MPI state: one per process, whatever the number of groups.
struct Runtime {
  std::mutex mu;
  bool initialised = false;
  bool finalize_asked = false;
  bool finalized = false;
  int live = 0;                  // communicators not yet freed
  MPI_Op bf16_ops[3]{};          // sum (also avg), min, max over bf16 bits
  int tag_ub = 32767;            // the largest tag (MPI guarantees at least 32767)
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, size_t(len));
}

void check(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) throw Error(what + " failed: " + mpi_error(rc));
}

template <float (*Op)(float, float)>
void bf16_user_op(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_reduce<Op>(inout, in, inout, size_t(*len));
}

MPI_Datatype mpi_type(ElemType t) {
  switch (t) {
    case ElemType::f32: return MPI_FLOAT;
    case ElemType::f64: return MPI_DOUBLE;
    case ElemType::i32: return MPI_INT32_T;
    case ElemType::i64: return MPI_INT64_T;
    case ElemType::bf16: return MPI_UINT16_T;  // its bits; reduced by the user-defined ops only
  }
  return MPI_BYTE;
}

// avg reduces as a sum; the caller scales.
MPI_Op mpi_op(ElemType t, ReduceOp op) {
  const int k = op == ReduceOp::min ? 1 : op == ReduceOp::max ? 2 : 0;
  if (t == ElemType::bf16) return runtime().bf16_ops[k];
  return k == 1 ? MPI_MIN : k == 2 ? MPI_MAX : MPI_SUM;
}

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  return an && bn && x < y + bn && y < x + an;
}

// OpenMPI's MPI_Init installs its own handlers for SIGSEGV, SIGBUS, SIGFPE and SIGABRT (a stack
// dump); dtrain's (core/limits: a file truncated under its mapping, out of memory) stay in charge.
class KeepFaultHandlers {
 public:
  KeepFaultHandlers() {
    for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], nullptr, &saved_[i]);
  }
  ~KeepFaultHandlers() {
    for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &saved_[i], nullptr);
  }

 private:
  static constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGABRT};
  struct sigaction saved_[std::size(kSignals)] {};
};

constexpr size_t kChunk = size_t(1) << 30;  // elements per MPI call (counts are int)

class MpiBackend final : public Backend {
 public:
  MpiBackend(MPI_Comm comm, MPI_Comm ring, std::string name) : comm_(comm), ring_(ring), name_(std::move(name)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  ~MpiBackend() override {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mu);
    MPI_Comm_free(&ring_);
    MPI_Comm_free(&comm_);
    if (--rt.live == 0 && rt.finalize_asked && !rt.finalized) finalize_now(rt);
  }

  static void finalize_now(Runtime& rt) {
    for (MPI_Op& op : rt.bf16_ops) MPI_Op_free(&op);
    MPI_Finalize();
    rt.finalized = true;
  }

  bool gives_up() const override { return false; }

  [[noreturn]] void abort_job(const std::string& why) override {
    std::fprintf(stderr,
                 "dtrain: error: %s. MPI cannot cancel an operation, so the whole job is ended (MPI_Abort); "
                 "restart it, or resume from the last checkpoint\n",
                 why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    std::_Exit(2);
  }

  void allreduce(void* data, size_t n, ElemType t, ReduceOp op) override {
    const size_t es = elem_size(t);
    for (size_t at = 0; at < n; at += kChunk) {
      const int c = int(std::min(kChunk, n - at));
      check(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * es, c, mpi_type(t), mpi_op(t, op), comm_),
            "MPI_Allreduce");
    }
    if (op == ReduceOp::avg) scale_elements(data, n, t, 1.0 / size_);
  }

  void allgather(const void* in, void* out, const std::vector<size_t>& counts, ElemType t) override {
    const size_t es = elem_size(t);
    std::vector<int> recv, displs;
    const size_t total = int_layout(counts, "allgather", recv, displs);
    if (total == 0) return;
    bool equal = true;
    for (size_t c : counts) equal = equal && c == counts[0];
    int_count(total, "allgather");
    const size_t mine = counts[size_t(rank_)] * es;
    char* slot = static_cast<char*>(out) + size_t(displs[size_t(rank_)]) * es;
    const void* send = in;
    if (in == slot) {
      send = MPI_IN_PLACE;
    } else if (overlaps(in, mine, out, total * es)) {  // MPI forbids aliased buffers
      std::memmove(slot, in, mine);
      send = MPI_IN_PLACE;
    }
    const MPI_Datatype type = mpi_type(t);
    if (equal)
      check(MPI_Allgather(send, recv[0], type, out, recv[0], type, comm_), "MPI_Allgather");
    else
      check(MPI_Allgatherv(send, recv[size_t(rank_)], type, out, recv.data(), displs.data(), type, comm_),
            "MPI_Allgatherv");
  }

  // The ring the Gloo backend runs (comm/reduce_math.hpp), over MPI's point-to-point on a
  // communicator of its own (its messages never meet the group's sends and receives), into buffers
  // kept between calls: MPI_Reduce_scatter allocates fresh ones on every call, which the kernel
  // zero-fills (98k page faults for 256 MiB; a third of Gloo's bandwidth from 64 MiB up,
  // bench/README.md), and it adds in another order.
  void reduce_scatter(const void* in, void* out, const std::vector<size_t>& counts, ElemType t,
                      ReduceOp op) override {
    const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
    ring_reduce_scatter(size_, rank_, in, out, counts, t, op, work_, incoming_,
                        [&](int, char* send, size_t send_bytes, char* recv, size_t recv_bytes) {
                          MPI_Request req = MPI_REQUEST_NULL;
                          if (send_bytes)
                            check(MPI_Isend(send, int_count(send_bytes, "reduce-scatter", "bytes"), MPI_BYTE, next, 0, ring_,
                                            &req),
                                  "MPI_Isend (reduce-scatter)");
                          if (recv_bytes)
                            check(MPI_Recv(recv, int_count(recv_bytes, "reduce-scatter", "bytes"), MPI_BYTE, prev, 0, ring_,
                                           MPI_STATUS_IGNORE),
                                  "MPI_Recv (reduce-scatter)");
                          return [req]() mutable {
                            if (req != MPI_REQUEST_NULL) check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait (reduce-scatter)");
                          };
                        });
  }

  void broadcast(void* data, size_t n, ElemType t, int root) override {
    const size_t es = elem_size(t);
    for (size_t at = 0; at < n; at += kChunk) {
      const int c = int(std::min(kChunk, n - at));
      check(MPI_Bcast(static_cast<char*>(data) + at * es, c, mpi_type(t), root, comm_), "MPI_Bcast");
    }
  }

  // Equal blocks of at most 2^31 - 1 elements (an MPI count); the library copies this rank's own.
  void all_to_all(const void* in, void* out, size_t n, ElemType t) override {
    if (n == 0) return;
    const int c = int_count(n, "all_to_all");
    const MPI_Datatype type = mpi_type(t);
    check(MPI_Alltoall(in, c, type, out, c, type, comm_), "MPI_Alltoall");
  }

  // Blocks of their own sizes, each and the elements before each at most 2^31 - 1 (MPI's int
  // counts and displacements); the library copies this rank's own.
  void all_to_all_v(const void* in, const std::vector<size_t>& send_counts, void* out,
                    const std::vector<size_t>& recv_counts, ElemType t) override {
    std::vector<int> sends, send_at, recvs, recv_at;
    int_layout(send_counts, "all_to_all_v", sends, send_at);
    int_layout(recv_counts, "all_to_all_v", recvs, recv_at);
    const MPI_Datatype type = mpi_type(t);
    check(MPI_Alltoallv(in, sends.data(), send_at.data(), type, out, recvs.data(), recv_at.data(), type, comm_),
          "MPI_Alltoallv");
  }

  // Messages over kChunk bytes go as several (MPI keeps their order between two ranks and a tag);
  // an empty one is still one message, so that its receive completes.
  std::function<void()> post_send(const void* data, size_t bytes, int dst, uint32_t tag) override {
    return post(const_cast<void*>(data), bytes, dst, tag, true);
  }

  std::function<void()> post_recv(void* data, size_t bytes, int src, uint32_t tag) override {
    return post(data, bytes, src, tag, false);
  }

  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }

 private:
  int int_count(size_t n, const char* op, const char* unit = "elements") const {
    require(n <= size_t(INT_MAX), "process group '" + name_ + "': " + op + " of " + std::to_string(n) + " " + unit +
                                      " is more than MPI's counts hold (2^31 - 1 per call): use "
                                      "parallel.backend = gloo for such sizes");
    return int(n);
  }

  // Blocks of `counts` elements one after another as MPI's int counts and displacements (in
  // elements), each checked by int_count; returns their total.
  size_t int_layout(const std::vector<size_t>& counts, const char* op, std::vector<int>& ints,
                    std::vector<int>& displs) const {
    ints.resize(counts.size());
    displs.resize(counts.size());
    size_t total = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      ints[i] = int_count(counts[i], op);
      displs[i] = int_count(total, op);
      total += counts[i];
    }
    return total;
  }

  std::function<void()> post(void* data, size_t bytes, int peer, uint32_t tag, bool send) {
    require(tag <= uint32_t(runtime().tag_ub), "process group '" + name_ + "': message tag " + std::to_string(tag) +
                                                   " is above this MPI's largest (" +
                                                   std::to_string(runtime().tag_ub) + ")");
    auto requests = std::make_shared<std::vector<MPI_Request>>();
    size_t at = 0;
    do {
      const int c = int(std::min(kChunk, bytes - at));
      MPI_Request r;
      char* p = static_cast<char*>(data) + at;
      check(send ? MPI_Isend(p, c, MPI_BYTE, peer, int(tag), comm_, &r)
                 : MPI_Irecv(p, c, MPI_BYTE, peer, int(tag), comm_, &r),
            send ? "MPI_Isend" : "MPI_Irecv");
      requests->push_back(r);
      at += size_t(c);
    } while (at < bytes);
    return [requests, send] {
      check(MPI_Waitall(int(requests->size()), requests->data(), MPI_STATUSES_IGNORE),
            send ? "MPI_Isend's wait" : "MPI_Irecv's wait");
    };
  }

  MPI_Comm comm_;
  MPI_Comm ring_;  // reduce-scatter's messages
  std::string name_;
  int rank_ = 0, size_ = 1;
  std::vector<char> work_, incoming_;  // reduce-scatter's, kept between calls
};

}  // namespace

void mpi_init(int* rank, int* size, std::string* version) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  if (!rt.initialised) {
    require(!rt.finalized, "MPI was finalized in this process: it cannot start again");
    int already = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&already);
    if (!already) {
      KeepFaultHandlers keep;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    } else {
      MPI_Query_thread(&provided);
    }
    require(provided >= MPI_THREAD_MULTIPLE,
            "this MPI gives thread level " + std::to_string(provided) + ", not MPI_THREAD_MULTIPLE (" +
                std::to_string(MPI_THREAD_MULTIPLE) +
                "), which dtrain needs (each process group runs its operations on a thread of its own): use an "
                "MPI built with thread support (OpenMPI has it since 3.0), or parallel.backend = gloo");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Op_create(&bf16_user_op<reduce_add>, 1, &rt.bf16_ops[0]), "MPI_Op_create");
    check(MPI_Op_create(&bf16_user_op<reduce_min>, 1, &rt.bf16_ops[1]), "MPI_Op_create");
    check(MPI_Op_create(&bf16_user_op<reduce_max>, 1, &rt.bf16_ops[2]), "MPI_Op_create");
    int* ub = nullptr;
    int found = 0;
    if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found) == MPI_SUCCESS && found && ub) rt.tag_ub = *ub;
    rt.initialised = true;
  }
  check(MPI_Comm_rank(MPI_COMM_WORLD, rank), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, size), "MPI_Comm_size");
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  *version = std::string(text, size_t(len));
  if (const size_t nl = version->find_first_of("\r\n,"); nl != std::string::npos) version->resize(nl);
}

std::unique_ptr<Backend> mpi_connect(const std::vector<int>& ranks, int tag, const std::string& group_name) {
  Runtime& rt = runtime();
  {
    std::lock_guard<std::mutex> lock(rt.mu);
    DT_ASSERT(rt.initialised && !rt.finalized);
  }
  const std::string doing = "process group '" + group_name + "' (" + std::to_string(ranks.size()) + " ranks): ";
  MPI_Group world = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
  check(MPI_Comm_group(MPI_COMM_WORLD, &world), doing + "MPI_Comm_group");
  check(MPI_Group_incl(world, int(ranks.size()), ranks.data(), &members), doing + "MPI_Group_incl");
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, members, tag, &comm);
  MPI_Group_free(&members);
  MPI_Group_free(&world);
  check(rc, doing + "MPI_Comm_create_group");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm ring = MPI_COMM_NULL;
  check(MPI_Comm_dup(comm, &ring), doing + "MPI_Comm_dup");
  {
    std::lock_guard<std::mutex> lock(rt.mu);
    ++rt.live;
  }
  return std::make_unique<MpiBackend>(comm, ring, group_name);
}

void mpi_finalize() {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  if (!rt.initialised || rt.finalized) return;
  rt.finalize_asked = true;
  if (rt.live == 0) MpiBackend::finalize_now(rt);
}

}  // namespace dtrain
