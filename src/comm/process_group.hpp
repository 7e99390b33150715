// Process groups: one API for collectives (allreduce, allgather, reduce-scatter, broadcast,
// all-to-all with equal or uneven shares, send/recv, barrier) over any backend. Every operation runs
// asynchronously, in issue order, on the group's communication thread and returns a Work handle; a
// failure or timeout becomes one dtrain::Error naming the operation, the group and the ranks that
// did not take part.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/store.hpp"

namespace dtrain {

enum class ReduceOp { sum, avg, min, max };
enum class ElemType { f32, f64, i32, i64, bf16 };  // bf16: its 16 bits (uint16_t)
constexpr size_t elem_size(ElemType t) {
  switch (t) {
    case ElemType::f32:
    case ElemType::i32: return 4;
    case ElemType::f64:
    case ElemType::i64: return 8;
    case ElemType::bf16: return 2;
  }
  return 0;
}
bool is_floating(ElemType t);
const char* reduce_op_name(ReduceOp op);

// How a device backend (NCCL) orders one operation with the compute stream. It is made on the
// issuing thread when the operation is issued (marking the compute stream's work so far, which the
// operation then waits for on its own stream), and Work::wait, on the waiting thread, makes the
// compute stream wait for the operation (the host does not wait).
class StreamOrder {
 public:
  virtual ~StreamOrder() = default;
  virtual bool finished() = 0;         // whether the device has completed the operation (any thread)
  virtual void wait_on_compute() = 0;  // the compute stream's later work waits for the operation
};

// What a backend (Gloo, NCCL, …) provides: blocking operations on one group. `counts` are
// elements per group rank.
class Backend {
 public:
  virtual ~Backend() = default;
  // A device backend's mark for an operation issued now (called on the issuing thread); nullptr for
  // a host backend, whose operations are complete when they return.
  virtual std::shared_ptr<StreamOrder> mark_issue() { return nullptr; }
  // The operation about to run (on this thread) goes with `order` (mark_issue's, or nullptr).
  virtual void use_order(std::shared_ptr<StreamOrder> order) { (void)order; }
  virtual void allreduce(void* data, size_t n, ElemType t, ReduceOp op) = 0;
  virtual void allgather(const void* in, void* out, const std::vector<size_t>& counts, ElemType t) = 0;
  virtual void reduce_scatter(const void* in, void* out, const std::vector<size_t>& counts, ElemType t,
                              ReduceOp op) = 0;
  virtual void broadcast(void* data, size_t n, ElemType t, int root) = 0;
  // Equal shares: `in` holds size() blocks of n elements, block j for group rank j; `out` receives
  // size() blocks, block j from group rank j. `in` and `out` do not overlap.
  virtual void all_to_all(const void* in, void* out, size_t n, ElemType t) = 0;
  // Uneven shares: `in` holds send_counts[j] elements for group rank j, `out` receives
  // recv_counts[j] elements from group rank j, each block after the one before, in rank order;
  // counts may be 0. The receiver must already know its counts (recv_counts[j] is rank j's
  // send_counts[this rank]): callers exchange them first, e.g. with all_to_all of one count per
  // rank. send_counts[this rank] == recv_counts[this rank]; `in` and `out` do not overlap.
  virtual void all_to_all_v(const void* in, const std::vector<size_t>& send_counts, void* out,
                            const std::vector<size_t>& recv_counts, ElemType t) = 0;
  // Point-to-point: posting never blocks (so a ring of sends and receives cannot deadlock on the
  // communication thread); the returned function waits for completion.
  virtual std::function<void()> post_send(const void* data, size_t bytes, int dst, uint32_t tag) = 0;
  virtual std::function<void()> post_recv(void* data, size_t bytes, int src, uint32_t tag) = 0;
  virtual void barrier() = 0;
  // Whether an operation gives up by itself after the group's timeout (Gloo). One that cannot (MPI,
  // NCCL) is watched by its group instead: an operation still running after the timeout (for a
  // device backend: not finished on the device) ends the job through abort_job(), with the group's
  // diagnosis of which ranks are missing.
  virtual bool gives_up() const { return true; }
  // Prints `why` as the error line and ends this process (and with it the job); never returns.
  [[noreturn]] virtual void abort_job(const std::string& why) {
    std::fprintf(stderr, "dtrain: error: %s\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(2);
  }
  // Host bytes it keeps between operations (working space, grow-only); callable from any thread.
  virtual size_t buffer_bytes() const { return 0; }
  // Whether its operations take no time (a planner's stand-in): then they run on the issuing thread,
  // in order, rather than being handed to the communication thread.
  virtual bool instant() const { return false; }
};

class Liveness;
class OpWatchdog;

// A handle to one asynchronous operation.
class Work {
 public:
  // Blocks until the operation ends; throws its error (once per handle, then again on re-wait).
  void wait();
  bool done() const;
  double seconds() const;  // time the operation took on the communication thread
  const std::string& describe() const { return what_; }

 private:
  friend class ProcessGroup;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
  double seconds_ = 0.0;
  std::string what_;
  std::string op_;    // "allreduce sum", "send", …
  size_t bytes_ = 0;  // the data it moves (this rank's side)
  bool p2p_ = false;  // a send or receive: not numbered among the group's collectives
  std::function<void()> finish_;  // point-to-point: completes on the waiting thread
  std::shared_ptr<StreamOrder> order_;  // a device backend's: the compute stream waits for it in wait()
  Millis timeout_{0};
};
using WorkPtr = std::shared_ptr<Work>;

class ProcessGroup {
 public:
  // ranks: the global ranks of the members (index = group rank); my_rank: this process's group
  // rank. The backend is created on the communication thread by make_backend.
  ProcessGroup(std::string name, std::vector<int> ranks, int my_rank, Millis timeout,
               std::shared_ptr<Liveness> liveness, std::unique_ptr<Backend> backend);
  ~ProcessGroup();  // finishes queued work, then stops the thread
  ProcessGroup(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return int(ranks_.size()); }
  const std::string& name() const { return name_; }
  const std::vector<int>& ranks() const { return ranks_; }
  Millis timeout() const { return timeout_; }
  size_t buffer_bytes() const { return backend_ ? backend_->buffer_bytes() : 0; }  // its backend's working space

  WorkPtr allreduce_async(void* data, size_t n, ElemType t, ReduceOp op);
  WorkPtr allgather_async(const void* in, void* out, const std::vector<size_t>& counts, ElemType t);
  WorkPtr reduce_scatter_async(const void* in, void* out, const std::vector<size_t>& counts, ElemType t,
                               ReduceOp op);
  WorkPtr broadcast_async(void* data, size_t n, ElemType t, int root);
  // Equal shares (Backend::all_to_all): in and out hold size() * n elements each, apart.
  WorkPtr all_to_all_async(const void* in, void* out, size_t n, ElemType t);
  // Uneven shares (Backend::all_to_all_v): one send and one receive count per rank, the same count
  // to and from this rank, the buffers apart. Traced with this rank's sent bytes.
  WorkPtr all_to_all_v_async(const void* in, const std::vector<size_t>& send_counts, void* out,
                             const std::vector<size_t>& recv_counts, ElemType t);
  WorkPtr send_async(const void* data, size_t bytes, int dst, uint32_t tag = 0);
  WorkPtr recv_async(void* data, size_t bytes, int src, uint32_t tag = 0);
  WorkPtr barrier_async();

  // Blocking forms: with nothing queued they run on the caller's thread (no hand-off latency).
  void allreduce(void* d, size_t n, ElemType t, ReduceOp op);
  void allreduce(float* d, size_t n, ReduceOp op = ReduceOp::sum) { allreduce(d, n, ElemType::f32, op); }
  void allreduce(double* d, size_t n, ReduceOp op = ReduceOp::sum) { allreduce(d, n, ElemType::f64, op); }
  void allreduce(int64_t* d, size_t n, ReduceOp op = ReduceOp::sum) { allreduce(d, n, ElemType::i64, op); }
  // Equal shares: out holds size() * n elements.
  void allgather(const void* in, void* out, size_t n, ElemType t);
  void broadcast(void* d, size_t n, ElemType t, int root);
  void all_to_all(const void* in, void* out, size_t n, ElemType t);
  void all_to_all_v(const void* in, const std::vector<size_t>& send_counts, void* out,
                    const std::vector<size_t>& recv_counts, ElemType t);
  void barrier();

 private:
  // Queues fn for the communication thread; `blocking` callers may run it themselves when idle.
  // op: what it is ("allreduce sum"); bytes: its size; detail: the rest of its description.
  WorkPtr enqueue(std::string op, size_t bytes, const std::string& detail, std::function<void(Backend&, Work&)> fn,
                  bool blocking = false);
  // all_to_all's (and all_to_all_v's) check of its arguments, then enqueue
  WorkPtr enqueue_all_to_all(const void* in, void* out, size_t n, ElemType t, bool blocking);
  WorkPtr enqueue_all_to_all_v(const void* in, const std::vector<size_t>& send_counts, void* out,
                               const std::vector<size_t>& recv_counts, ElemType t, bool blocking);
  void worker_main();
  void execute(Work& w, const std::function<void(Backend&, Work&)>& fn);
  std::string diagnose(const std::string& what, int64_t seq, const std::string& cause);
  std::string missing_ranks(int64_t seq);  // "; missing: rank 2 stopped (…)" from the heartbeats, or ""
  void overdue(const std::string& what, int64_t seq);  // the watchdog's end of the job (abort_job)
  // A point-to-point wait, watched when the backend cannot give up.
  std::function<void()> watched(std::function<void()> wait, const std::string& what);

  std::string name_;
  std::string trace_track_;  // "comm NAME": its operations' track in a trace
  std::vector<int> ranks_;
  int rank_;
  Millis timeout_;
  std::shared_ptr<Liveness> liveness_;
  std::unique_ptr<Backend> backend_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<WorkPtr, std::function<void(Backend&, Work&)>>> queue_;
  bool stop_ = false;
  bool busy_ = false;      // an operation is running (on the thread or inline)
  int64_t issued_ = 0;     // collectives issued (sends and receives are not numbered)
  int64_t started_ = 0;    // collectives begun, in order
  std::string broken_;  // first failure: later operations fail at once
  std::shared_ptr<OpWatchdog> watchdog_;  // a backend that cannot give up: its operations watched
  std::thread thread_;
};

}  // namespace dtrain
