// ProcessGroup (see process_group.hpp): the communication thread, Work handles and the error
// messages that name what went wrong.
#include "comm/process_group.hpp"

#include <chrono>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/trace.hpp"
#include "comm/liveness.hpp"
#include "comm/watchdog.hpp"

namespace dtrain {

bool is_floating(ElemType t) { return t == ElemType::f32 || t == ElemType::f64 || t == ElemType::bf16; }

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
  }
  return "?";
}

namespace {

std::string bytes_str(size_t b) {
  char s[32];
  if (b >= (1u << 20)) {
    std::snprintf(s, sizeof s, "%.1f MiB", double(b) / double(1u << 20));
  } else if (b >= 1024) {
    std::snprintf(s, sizeof s, "%.1f KiB", double(b) / 1024.0);
  } else {
    std::snprintf(s, sizeof s, "%zu B", b);
  }
  return s;
}

size_t total(const std::vector<size_t>& counts) {
  size_t n = 0;
  for (size_t c : counts) n += c;
  return n;
}

// Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share no byte.
bool apart(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return a_bytes == 0 || b_bytes == 0 || x + a_bytes <= y || y + b_bytes <= x;
}

}  // namespace

// ---- Work ----

void Work::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!done_ || !error_.empty() || finish_) {
    lock.unlock();
    PhaseScope exposed(Phase::comm);  // the training thread waits: communication not hidden
    lock.lock();
    // The backend enforces the timeout (or, for one that cannot give up, the group's watchdog); the
    // extra margin covers diagnosis after a failure.
    const auto limit = timeout_ + Millis(30000);
    if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
      throw Error(what_ + " did not finish within " + std::to_string(limit.count() / 1000) +
                  " s: the communication thread is stuck; stop the job");
    }
    if (!error_.empty()) throw Error(error_);
    if (finish_) {
      auto finish = std::move(finish_);
      finish_ = nullptr;
      lock.unlock();
      try {
        finish();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> relock(mu_);
        error_ = what_ + " failed: " + e.what() + ". The job cannot continue";
        throw Error(error_);
      }
      lock.lock();
    }
  }
  // A device operation: what the compute stream does from now on waits for it (the host does not).
  if (order_) order_->wait_on_compute();
}

bool Work::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

double Work::seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seconds_;
}

// ---- ProcessGroup ----

ProcessGroup::ProcessGroup(std::string name, std::vector<int> ranks, int my_rank, Millis timeout,
                           std::shared_ptr<Liveness> liveness, std::unique_ptr<Backend> backend)
    : name_(std::move(name)),
      trace_track_("comm " + name_),
      ranks_(std::move(ranks)),
      rank_(my_rank),
      timeout_(timeout),
      liveness_(std::move(liveness)),
      backend_(std::move(backend)) {
  if (!backend_->gives_up())
    watchdog_ = std::make_shared<OpWatchdog>(timeout_, [this](const std::string& what, int64_t seq) { overdue(what, seq); });
  thread_ = std::thread([this] { worker_main(); });
}

ProcessGroup::~ProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // (an operation stuck in a backend that cannot give up is ended by the watchdog)
  if (watchdog_) watchdog_->stop();
}

WorkPtr ProcessGroup::enqueue(std::string op, size_t bytes, const std::string& detail,
                              std::function<void(Backend&, Work&)> fn, bool blocking) {
  auto w = std::make_shared<Work>();
  w->timeout_ = timeout_;
  w->order_ = backend_->mark_issue();  // here, on the issuing thread: the compute stream's work so far
  w->op_ = std::move(op);
  w->bytes_ = bytes;
  const std::string what = w->op_ + (bytes || w->op_ != "barrier" ? " of " + bytes_str(bytes) : "") + detail;
  std::unique_lock<std::mutex> lock(mu_);
  // Collectives are numbered alike on every member (a diagnosis compares the numbers); a send or
  // receive, which only some members make, is placed after the collective before it.
  const bool p2p = w->op_ == "send" || w->op_ == "recv";
  w->p2p_ = p2p;
  if (!p2p) ++issued_;
  w->what_ = what + (p2p ? " (after operation #" : " (operation #") + std::to_string(issued_) + " of process group '" + name_ + "', " +
             std::to_string(size()) + " ranks)";
  if ((blocking || backend_->instant()) && queue_.empty() && !busy_) {
    // Nothing in flight: run on the caller's thread (no hand-off latency), in the same order.
    busy_ = true;
    lock.unlock();
    {
      PhaseScope exposed(Phase::comm);  // a blocking collective on the training thread
      execute(*w, fn);
    }
    lock.lock();
    busy_ = false;
    // the communication thread waits only for queued work or the end (a wake-up for nothing costs
    // two context switches per operation)
    const bool wake = !queue_.empty() || stop_;
    lock.unlock();
    if (wake) cv_.notify_all();
    return w;
  }
  queue_.emplace_back(w, std::move(fn));
  lock.unlock();
  cv_.notify_all();
  return w;
}

void ProcessGroup::worker_main() {
  for (;;) {
    std::pair<WorkPtr, std::function<void(Backend&, Work&)>> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return (stop_ && !busy_) || (!queue_.empty() && !busy_); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    execute(*item.first, item.second);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

void ProcessGroup::execute(Work& w, const std::function<void(Backend&, Work&)>& fn) {
  const int64_t seq = w.p2p_ ? started_ : ++started_;
  std::string error;
  const auto t0 = std::chrono::steady_clock::now();
  if (!broken_.empty()) {
    error = w.what_ + " not run: the group failed earlier (" + broken_ + ")";
  } else {
    if (liveness_) liveness_->started(name_, seq, ranks_);
    {
      TraceScope traced(trace_track_.c_str(), w.op_);  // recorded before the waiter learns it is done
      if (Trace::on())
        traced.set_args(Json{{"bytes", w.bytes_}, {"group", name_}, {"ranks", size()}, {"seq", seq}}.dump());
      try {
        {
          OpWatchdog::Scope watched(watchdog_.get(), w.what_, seq);
          backend_->use_order(w.order_);
          fn(*backend_, w);
        }
        // A device operation is queued, not done: watched until the device has finished it.
        if (w.order_ && watchdog_)
          watchdog_->watch_device(w.what_, seq, [order = w.order_] { return order->finished(); });
      } catch (const std::exception& e) {
        error = diagnose(w.what_, seq, e.what());
        broken_ = w.what_ + " failed";
      }
    }
    if (liveness_) liveness_->finished(name_);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  {
    std::lock_guard<std::mutex> lock(w.mu_);
    w.done_ = true;
    w.error_ = std::move(error);
    w.seconds_ = secs;
  }
  w.cv_.notify_all();
}

std::string ProcessGroup::missing_ranks(int64_t seq) {
  if (!liveness_) return "";
  const auto why = liveness_->explain(name_, seq, ranks_);
  std::string msg;
  for (size_t i = 0; i < why.size(); ++i) msg += (i ? ", " : "; missing: ") + why[i];
  return msg;
}

std::string ProcessGroup::diagnose(const std::string& what, int64_t seq, const std::string& cause) {
  return what + " failed: " + cause + missing_ranks(seq) +
         ". The job cannot continue: the launcher stops the other ranks (restart it, or resume from the last "
         "checkpoint)";
}

void ProcessGroup::overdue(const std::string& what, int64_t seq) {
  backend_->abort_job(what + " did not finish within " + std::to_string(timeout_.count() / 1000) +
                      " s (parallel.timeout_s)" + missing_ranks(seq));
}

WorkPtr ProcessGroup::allreduce_async(void* data, size_t n, ElemType t, ReduceOp op) {
  require(op != ReduceOp::avg || is_floating(t), "allreduce avg is defined for floating-point data only");
  return enqueue(std::string("allreduce ") + reduce_op_name(op), n * elem_size(t), "",
                 [=](Backend& b, Work&) { b.allreduce(data, n, t, op); });
}

WorkPtr ProcessGroup::allgather_async(const void* in, void* out, const std::vector<size_t>& counts, ElemType t) {
  require(int(counts.size()) == size(), "allgather needs one count per rank of the group");
  return enqueue("allgather", total(counts) * elem_size(t), "",
                 [=](Backend& b, Work&) { b.allgather(in, out, counts, t); });
}

void ProcessGroup::allgather(const void* in, void* out, size_t n, ElemType t) {
  std::vector<size_t> counts(size_t(size()), n);
  enqueue("allgather", n * size_t(size()) * elem_size(t), "",
          [=](Backend& b, Work&) { b.allgather(in, out, counts, t); }, true)->wait();
}

void ProcessGroup::allreduce(void* d, size_t n, ElemType t, ReduceOp op) {
  require(op != ReduceOp::avg || is_floating(t), "allreduce avg is defined for floating-point data only");
  enqueue(std::string("allreduce ") + reduce_op_name(op), n * elem_size(t), "",
          [=](Backend& b, Work&) { b.allreduce(d, n, t, op); }, true)->wait();
}

void ProcessGroup::broadcast(void* d, size_t n, ElemType t, int root) {
  require(root >= 0 && root < size(), "broadcast root " + std::to_string(root) + " is not a rank of the group");
  enqueue("broadcast", n * elem_size(t), " from rank " + std::to_string(root),
          [=](Backend& b, Work&) { b.broadcast(d, n, t, root); }, true)->wait();
}

void ProcessGroup::barrier() { enqueue("barrier", 0, "", [](Backend& b, Work&) { b.barrier(); }, true)->wait(); }

WorkPtr ProcessGroup::reduce_scatter_async(const void* in, void* out, const std::vector<size_t>& counts, ElemType t,
                                           ReduceOp op) {
  require(int(counts.size()) == size(), "reduce-scatter needs one count per rank of the group");
  require(is_floating(t), "reduce-scatter is defined for floating-point data only");
  return enqueue(std::string("reduce-scatter ") + reduce_op_name(op), total(counts) * elem_size(t), "",
                 [=](Backend& b, Work&) { b.reduce_scatter(in, out, counts, t, op); });
}

WorkPtr ProcessGroup::broadcast_async(void* data, size_t n, ElemType t, int root) {
  require(root >= 0 && root < size(), "broadcast root " + std::to_string(root) + " is not a rank of the group");
  return enqueue("broadcast", n * elem_size(t), " from rank " + std::to_string(root),
                 [=](Backend& b, Work&) { b.broadcast(data, n, t, root); });
}

WorkPtr ProcessGroup::enqueue_all_to_all(const void* in, void* out, size_t n, ElemType t, bool blocking) {
  const size_t bytes = size_t(size()) * n * elem_size(t);
  require(apart(in, bytes, out, bytes), "all_to_all needs input and output buffers apart");
  return enqueue("all_to_all", bytes, "", [=](Backend& be, Work&) { be.all_to_all(in, out, n, t); }, blocking);
}

WorkPtr ProcessGroup::all_to_all_async(const void* in, void* out, size_t n, ElemType t) {
  return enqueue_all_to_all(in, out, n, t, false);
}

void ProcessGroup::all_to_all(const void* in, void* out, size_t n, ElemType t) {
  enqueue_all_to_all(in, out, n, t, true)->wait();
}

WorkPtr ProcessGroup::enqueue_all_to_all_v(const void* in, const std::vector<size_t>& send_counts, void* out,
                                           const std::vector<size_t>& recv_counts, ElemType t, bool blocking) {
  const size_t P = size_t(size()), me = size_t(rank_);
  require(send_counts.size() == P && recv_counts.size() == P,
          "all_to_all_v needs one send and one receive count per rank of the group (" + std::to_string(P) +
              "), not " + std::to_string(send_counts.size()) + " and " + std::to_string(recv_counts.size()));
  require(send_counts[me] == recv_counts[me],
          "all_to_all_v: rank " + std::to_string(rank_) + " sends itself " + std::to_string(send_counts[me]) +
              " elements but expects " + std::to_string(recv_counts[me]) + ": its own block's two counts must agree");
  const size_t sent = total(send_counts) * elem_size(t);
  require(apart(in, sent, out, total(recv_counts) * elem_size(t)), "all_to_all_v needs input and output buffers apart");
  return enqueue("all_to_all_v", sent, "",
                 [=](Backend& b, Work&) { b.all_to_all_v(in, send_counts, out, recv_counts, t); }, blocking);
}

WorkPtr ProcessGroup::all_to_all_v_async(const void* in, const std::vector<size_t>& send_counts, void* out,
                                         const std::vector<size_t>& recv_counts, ElemType t) {
  return enqueue_all_to_all_v(in, send_counts, out, recv_counts, t, false);
}

void ProcessGroup::all_to_all_v(const void* in, const std::vector<size_t>& send_counts, void* out,
                                const std::vector<size_t>& recv_counts, ElemType t) {
  enqueue_all_to_all_v(in, send_counts, out, recv_counts, t, true)->wait();
}

std::function<void()> ProcessGroup::watched(std::function<void()> wait, const std::string& what) {
  if (!watchdog_) return wait;
  // The wait runs on the thread that waits for the Work, possibly after the group is gone: the
  // closure keeps the watchdog (stopped by then) alive, not the group.
  return [watchdog = watchdog_, wait = std::move(wait), what, seq = started_] {
    OpWatchdog::Scope scope(watchdog.get(), what, seq);
    wait();
  };
}

WorkPtr ProcessGroup::send_async(const void* data, size_t bytes, int dst, uint32_t tag) {
  require(dst >= 0 && dst < size() && dst != rank_, "send to rank " + std::to_string(dst) + " of group '" + name_ +
                                                        "' is not possible (size " + std::to_string(size()) + ")");
  return enqueue("send", bytes, " to rank " + std::to_string(dst),
                 [=, this](Backend& b, Work& w) { w.finish_ = watched(b.post_send(data, bytes, dst, tag), w.what_); });
}

WorkPtr ProcessGroup::recv_async(void* data, size_t bytes, int src, uint32_t tag) {
  require(src >= 0 && src < size() && src != rank_, "recv from rank " + std::to_string(src) + " of group '" + name_ +
                                                        "' is not possible (size " + std::to_string(size()) + ")");
  return enqueue("recv", bytes, " from rank " + std::to_string(src),
                 [=, this](Backend& b, Work& w) { w.finish_ = watched(b.post_recv(data, bytes, src, tag), w.what_); });
}

WorkPtr ProcessGroup::barrier_async() {
  return enqueue("barrier", 0, "", [](Backend& b, Work&) { b.barrier(); });
}

}  // namespace dtrain
