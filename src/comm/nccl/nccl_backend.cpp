// NCCL backend (see nccl_backend.hpp). Every operation: an event recorded on the compute stream
// when it is issued (on the issuing thread), which the communication stream waits for before NCCL
// runs there; an event recorded after it, which the compute stream waits for in Work::wait. The
// group's watchdog polls that event and, past the timeout, aborts the communicator and ends the
// job naming the operation. Uneven all-gathers and reduce-scatters are grouped broadcasts and
// reduces, an all-to-all (equal or uneven) grouped sends and receives; point-to-point operations
// are held until the first wait and then issued together in one NCCL group, so a ring of sends and
// receives cannot deadlock.
#include "comm/nccl/nccl_backend.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "core/descriptors.hpp"
#include "core/error.hpp"

namespace dtrain {

namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

ncclDataType_t nccl_type(ElemType t) {
  switch (t) {
    case ElemType::f32: return ncclFloat32;
    case ElemType::f64: return ncclFloat64;
    case ElemType::i32: return ncclInt32;
    case ElemType::i64: return ncclInt64;
    case ElemType::bf16: return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
  }
  return ncclSum;
}

// One operation's two events: `issued` on the compute stream (at issue), `done` on the
// communication stream (after NCCL). Reused through OrderPool.
class NcclOrder final : public StreamOrder {
 public:
  NcclOrder(int gpu, cudaStream_t compute) : gpu_(gpu), compute_(compute) {
    check_cuda(cudaEventCreateWithFlags(&issued_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~NcclOrder() override {
    cudaEventDestroy(issued_);
    cudaEventDestroy(done_);
  }
  void mark_issue() {
    recorded_ = false;
    check_cuda(cudaSetDevice(gpu_), "cudaSetDevice");
    check_cuda(cudaEventRecord(issued_, compute_), "cudaEventRecord");
  }
  // On the communication stream, around the operation.
  void before(cudaStream_t comm) { check_cuda(cudaStreamWaitEvent(comm, issued_, 0), "cudaStreamWaitEvent"); }
  void after(cudaStream_t comm) {
    check_cuda(cudaEventRecord(done_, comm), "cudaEventRecord");
    recorded_ = true;
  }
  bool finished() override { return recorded_ && cudaEventQuery(done_) == cudaSuccess; }
  void wait_on_compute() override {
    if (!recorded_) return;  // the operation failed before it was queued (its error is thrown)
    check_cuda(cudaSetDevice(gpu_), "cudaSetDevice");
    check_cuda(cudaStreamWaitEvent(compute_, done_, 0), "cudaStreamWaitEvent");
  }

 private:
  int gpu_;
  cudaStream_t compute_;
  cudaEvent_t issued_ = nullptr, done_ = nullptr;
  std::atomic<bool> recorded_{false};
};

// Orders are reused (no event is created inside the step loop once the in-flight count is
// reached); the pool outlives the backend while a Work still holds one.
class OrderPool : public std::enable_shared_from_this<OrderPool> {
 public:
  OrderPool(int gpu, cudaStream_t compute) : gpu_(gpu), compute_(compute) {}
  std::shared_ptr<NcclOrder> take() {
    std::unique_ptr<NcclOrder> o;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        o = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (!o) {
      check_cuda(cudaSetDevice(gpu_), "cudaSetDevice");
      o = std::make_unique<NcclOrder>(gpu_, compute_);
    }
    o->mark_issue();
    return std::shared_ptr<NcclOrder>(o.release(), [pool = shared_from_this()](NcclOrder* p) {
      std::lock_guard<std::mutex> lock(pool->mu_);
      pool->free_.emplace_back(p);
    });
  }

 private:
  int gpu_;
  cudaStream_t compute_;
  std::mutex mu_;
  std::vector<std::unique_ptr<NcclOrder>> free_;
};

class NcclBackend final : public Backend {
 public:
  NcclBackend(ncclComm_t comm, int gpu, cudaStream_t compute, Millis timeout, std::string name)
      : comm_(comm), gpu_(gpu), compute_(compute), timeout_(timeout), name_(std::move(name)) {
    check_cuda(cudaSetDevice(gpu_), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&barrier_done_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaMalloc(&token_, sizeof(float)), "cudaMalloc");
    pool_ = std::make_shared<OrderPool>(gpu_, compute_);
  }
  ~NcclBackend() override {
    cudaSetDevice(gpu_);
    if (broken_) ncclCommAbort(comm_);
    else {
      cudaStreamSynchronize(comm_stream_);
      ncclCommDestroy(comm_);
    }
    cudaFree(token_);
    cudaEventDestroy(barrier_done_);
    cudaStreamDestroy(comm_stream_);
  }

  std::shared_ptr<StreamOrder> mark_issue() override { return pool_->take(); }
  void use_order(std::shared_ptr<StreamOrder> order) override {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::static_pointer_cast<NcclOrder>(std::move(order));
  }
  bool gives_up() const override { return false; }  // queued on a stream: the group's watchdog watches it
  // The watchdog's end of the job: abort the communicator (its kernels return, so no stream stays
  // stuck behind them), then the error line.
  [[noreturn]] void abort_job(const std::string& why) override {
    const std::string nccl = last_error();
    ncclCommAbort(comm_);
    Backend::abort_job(why + " (NCCL communicator aborted" + (nccl.empty() ? "" : "; NCCL: " + nccl) + ")");
  }

  void allreduce(void* data, size_t n, ElemType t, ReduceOp op) override {
    ordered("allreduce", [&] { return ncclAllReduce(data, data, n, nccl_type(t), nccl_op(op), comm_, comm_stream_); });
  }
  void allgather(const void* in, void* out, const std::vector<size_t>& counts, ElemType t) override {
    ordered("allgather", [&] {
      bool equal = true;
      for (size_t c : counts) equal = equal && c == counts[0];
      if (equal) return ncclAllGather(in, out, counts[0], nccl_type(t), comm_, comm_stream_);
      ncclResult_t r = ncclGroupStart();
      size_t off = 0;
      for (size_t i = 0; i < counts.size() && r == ncclSuccess; ++i) {
        char* dst = static_cast<char*>(out) + off * elem_size(t);
        r = ncclBroadcast(int(i) == rank() ? in : dst, dst, counts[i], nccl_type(t), int(i), comm_, comm_stream_);
        off += counts[i];
      }
      const ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    });
  }
  void reduce_scatter(const void* in, void* out, const std::vector<size_t>& counts, ElemType t,
                      ReduceOp op) override {
    ordered("reduce_scatter", [&] {
      bool equal = true;
      for (size_t c : counts) equal = equal && c == counts[0];
      if (equal) return ncclReduceScatter(in, out, counts[0], nccl_type(t), nccl_op(op), comm_, comm_stream_);
      ncclResult_t r = ncclGroupStart();
      size_t off = 0;
      for (size_t i = 0; i < counts.size() && r == ncclSuccess; ++i) {
        const char* src = static_cast<const char*>(in) + off * elem_size(t);
        // non-roots pass their own output as the (unused) receive buffer
        r = ncclReduce(src, out, counts[i], nccl_type(t), nccl_op(op), int(i), comm_, comm_stream_);
        off += counts[i];
      }
      const ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    });
  }
  void broadcast(void* data, size_t n, ElemType t, int root) override {
    ordered("broadcast", [&] { return ncclBroadcast(data, data, n, nccl_type(t), root, comm_, comm_stream_); });
  }
  // Equal blocks, and uneven ones (each peer's send and receive left out where its block is empty):
  // exchange() below.
  void all_to_all(const void* in, void* out, size_t n, ElemType t) override {
    ordered("all_to_all", [&] {
      if (n == 0) return ncclSuccess;
      const auto block = [n](int) { return n; };
      return exchange(in, block, out, block, t);
    });
  }
  void all_to_all_v(const void* in, const std::vector<size_t>& send_counts, void* out,
                    const std::vector<size_t>& recv_counts, ElemType t) override {
    ordered("all_to_all_v", [&] {
      return exchange(in, [&](int j) { return send_counts[size_t(j)]; }, out,
                      [&](int j) { return recv_counts[size_t(j)]; }, t);
    });
  }
  std::function<void()> post_send(const void* data, size_t bytes, int dst, uint32_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({const_cast<void*>(data), bytes, dst, true, current_});
    return [this] { flush_p2p(); };
  }
  std::function<void()> post_recv(void* data, size_t bytes, int src, uint32_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({data, bytes, src, false, current_});
    return [this] { flush_p2p(); };
  }
  // A real barrier: the host waits (up to the group's timeout) until every rank's allreduce of a
  // token has completed.
  void barrier() override {
    allreduce(token_, 1, ElemType::f32, ReduceOp::sum);
    check_cuda(cudaEventRecord(barrier_done_, comm_stream_), "cudaEventRecord");
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (true) {
      const cudaError_t q = cudaEventQuery(barrier_done_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) check_cuda(q, "barrier");
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess) fail("barrier", async);
      if (std::chrono::steady_clock::now() > deadline) {
        broken_ = true;
        throw Error("NCCL barrier of group '" + name_ + "' did not complete within " +
                    std::to_string(timeout_.count() / 1000) + " s: a rank has stopped or is stuck");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  struct P2p {
    void* data;
    size_t bytes;
    int peer;
    bool send;
    std::shared_ptr<NcclOrder> order;
  };
  int rank() const {
    int r = 0;
    ncclCommUserRank(comm_, &r);
    return r;
  }
  int size() const {
    int p = 0;
    ncclCommCount(comm_, &p);
    return p;
  }
  std::string last_error() const {
    const char* m = ncclGetLastError(comm_);
    return m ? m : "";
  }
  [[noreturn]] void fail(const char* what, ncclResult_t r) {
    broken_ = true;
    throw Error(std::string("NCCL ") + what + " in group '" + name_ + "' failed: " + ncclGetErrorString(r) + " (" +
                last_error() + ")");
  }
  // Runs `op` on the communication stream after the compute stream's work up to the operation's
  // issue (its order's event), and records the operation's end for Work::wait and the watchdog.
  // Without an order (none given) it waits for the compute stream's work so far.
  template <class F>
  void ordered(const char* what, F&& op, const std::vector<std::shared_ptr<NcclOrder>>& orders) {
    check_cuda(cudaSetDevice(gpu_), "cudaSetDevice");
    for (const auto& o : orders) o->before(comm_stream_);
    if (orders.empty()) {
      std::shared_ptr<NcclOrder> now = pool_->take();
      now->before(comm_stream_);
    }
    const ncclResult_t r = op();
    if (r != ncclSuccess) fail(what, r);
    for (const auto& o : orders) o->after(comm_stream_);
  }
  template <class F>
  void ordered(const char* what, F&& op) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<NcclOrder>> orders;
    if (current_) orders.push_back(current_);
    ordered(what, std::forward<F>(op), orders);
  }
  // An all-to-all over blocks laid one after another in rank order, send_n(j) elements of `in` for
  // rank j and recv_n(j) of `out` from it. This rank's own block is a copy on the communication
  // stream; the others go as one NCCL group of a send and a receive per peer, each only for a
  // non-empty block (the peer's matching call is left out too: its counts mirror these).
  template <class SendN, class RecvN>
  ncclResult_t exchange(const void* in, SendN send_n, void* out, RecvN recv_n, ElemType t) {
    const size_t es = elem_size(t);
    const int me = rank(), P = size();
    const char* src = static_cast<const char*>(in);
    char* dst = static_cast<char*>(out);
    size_t send_at = 0, recv_at = 0;  // elements before this rank's own block
    for (int j = 0; j < me; ++j) send_at += send_n(j), recv_at += recv_n(j);
    if (send_n(me))
      check_cuda(cudaMemcpyAsync(dst + recv_at * es, src + send_at * es, send_n(me) * es, cudaMemcpyDeviceToDevice,
                                 comm_stream_),
                 "cudaMemcpyAsync (all_to_all)");
    send_at = recv_at = 0;
    ncclResult_t r = ncclGroupStart();
    for (int j = 0; j < P && r == ncclSuccess; ++j) {
      const size_t s = send_n(j), n = recv_n(j);
      if (j != me && s) r = ncclSend(src + send_at * es, s, nccl_type(t), j, comm_, comm_stream_);
      if (j != me && n && r == ncclSuccess) r = ncclRecv(dst + recv_at * es, n, nccl_type(t), j, comm_, comm_stream_);
      send_at += s;
      recv_at += n;
    }
    const ncclResult_t e = ncclGroupEnd();
    return r != ncclSuccess ? r : e;
  }
  void flush_p2p() {
    std::vector<P2p> ops;
    std::lock_guard<std::mutex> lock(mu_);
    ops.swap(pending_);
    if (ops.empty()) return;
    std::vector<std::shared_ptr<NcclOrder>> orders;
    for (const P2p& p : ops)
      if (p.order) orders.push_back(p.order);
    ordered("send/recv", [&] {
      ncclResult_t r = ncclGroupStart();
      for (const P2p& p : ops) {
        if (r != ncclSuccess) break;
        r = p.send ? ncclSend(p.data, p.bytes, ncclUint8, p.peer, comm_, comm_stream_)
                   : ncclRecv(p.data, p.bytes, ncclUint8, p.peer, comm_, comm_stream_);
      }
      const ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    }, orders);
  }

  ncclComm_t comm_;
  int gpu_;
  cudaStream_t compute_;
  Millis timeout_;
  std::string name_;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t barrier_done_ = nullptr;
  float* token_ = nullptr;
  std::shared_ptr<OrderPool> pool_;
  std::mutex mu_;  // the communication stream's queue: operations, pending sends and receives
  std::shared_ptr<NcclOrder> current_;  // the operation running now (use_order)
  std::vector<P2p> pending_;
  bool broken_ = false;
};

// NCCL's last error message ("" when none); its comm argument is not needed for it.
std::string last_nccl_error() {
  const char* m = ncclGetLastError(nullptr);
  return m ? m : "";
}

}  // namespace

std::unique_ptr<Backend> connect_nccl(Store& store, int rank, int size, int gpu, void* compute_stream, Millis timeout,
                                      const std::string& group_name) {
  check_cuda(cudaSetDevice(gpu), "cudaSetDevice");
  ncclUniqueId id;
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      throw_if_library_ran_out_of_descriptors(last_nccl_error(), "NCCL could not make an id");
      throw Error(std::string("NCCL could not make an id: ") + ncclGetErrorString(r));
    }
    store.set("nccl_id", std::string(reinterpret_cast<const char*>(&id), sizeof id));
  }
  const auto missing = store.wait({"nccl_id"}, timeout);
  require(missing.empty(), "NCCL group '" + group_name + "': rank 0 did not publish its NCCL id within " +
                               std::to_string(timeout.count() / 1000) + " s");
  const std::string blob = store.get("nccl_id", timeout);
  require(blob.size() == sizeof id, "NCCL group '" + group_name + "': the published NCCL id is malformed");
  std::memcpy(&id, blob.data(), sizeof id);
  ncclComm_t comm;
  const ncclResult_t r = ncclCommInitRank(&comm, size, id, rank);
  if (r != ncclSuccess) {
    // NCCL's sockets and proxy threads need descriptors; short of them it says "system error".
    throw_if_library_ran_out_of_descriptors(last_nccl_error(), "NCCL group '" + group_name + "' could not be formed");
    throw Error("NCCL group '" + group_name + "' could not be formed (rank " + std::to_string(rank) + " of " +
                std::to_string(size) + "): " + ncclGetErrorString(r) +
                "; check that every rank sees its GPU and that NCCL_SOCKET_IFNAME names a reachable interface");
  }
  return std::make_unique<NcclBackend>(comm, gpu, static_cast<cudaStream_t>(compute_stream), timeout, group_name);
}

}  // namespace dtrain
