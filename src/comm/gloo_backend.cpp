// Gloo backend (see gloo_backend.hpp). Collectives use Gloo's option-based API only (mixing in
// its older algorithm classes on one context slows it down); reduce-scatter (the ring shared with
// the MPI backend) and point-to-point run over unbound buffers.
#include "comm/gloo_backend.hpp"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <netdb.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "comm/reduce_math.hpp"
#include "core/descriptors.hpp"
#include "core/error.hpp"

namespace dtrain {

namespace {

// Gloo's view of our store.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(dtrain::Store& s, Millis timeout, std::string group) : s_(s), timeout_(timeout), group_(std::move(group)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    s_.set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::string v = s_.get(key, timeout_, "process group '" + group_ + "' setup");
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    auto missing = s_.wait(keys, timeout);
    require(missing.empty(), "process group '" + group_ + "' setup timed out waiting for store key '" +
                                 (missing.empty() ? "" : missing[0]) + "'");
  }

 private:
  dtrain::Store& s_;
  Millis timeout_;
  std::string group_;
};

constexpr uint8_t kP2pSlot = 0xD0;
constexpr uint8_t kReduceScatterSlot = 0xD1;

class GlooBackend : public Backend {
 public:
  GlooBackend(std::shared_ptr<gloo::Context> ctx, Millis timeout) : ctx_(std::move(ctx)), timeout_(timeout) {}

  void allreduce(void* data, size_t n, ElemType t, ReduceOp op) override {
    if (n == 0) return;
    gloo::AllreduceOptions o(ctx_);
    set_output(o, ctx_->createUnboundBuffer(data, n * elem_size(t)), t);
    o.setReduceFunction(reduce_fn(t, op));
    o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    o.setTag(next_tag());
    o.setTimeout(timeout_);
    gloo::allreduce(o);
    if (op == ReduceOp::avg) scale_elements(data, n, t, 1.0 / ctx_->size);
  }

  void allgather(const void* in, void* out, const std::vector<size_t>& counts, ElemType t) override {
    const size_t es = elem_size(t);
    bool equal = true;
    for (size_t c : counts) equal = equal && c == counts[0];
    const uint32_t tag = next_tag();
    if (equal) {
      if (counts[0] == 0) return;
      gloo::AllgatherOptions o(ctx_);
      // in-place when `in` already sits at this rank's slot of `out`
      char* mine = static_cast<char*>(out) + size_t(ctx_->rank) * counts[0] * es;
      if (in != mine) o.setInput<char>(ctx_->createUnboundBuffer(const_cast<void*>(in), counts[0] * es));
      o.setOutput<char>(ctx_->createUnboundBuffer(out, counts[0] * es * counts.size()));
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::allgather(o);
    } else {
      gloo::AllgathervOptions o(ctx_);
      const auto bytes = byte_counts<size_t>(counts, t);  // byte-typed: counts in bytes
      o.setInput<char>(static_cast<char*>(const_cast<void*>(in)), bytes[size_t(ctx_->rank)]);
      o.setOutput<char>(static_cast<char*>(out), bytes);
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::allgatherv(o);
    }
  }

  // The shared ring (comm/reduce_math.hpp) over unbound buffers, a slot per step.
  void reduce_scatter(const void* in, void* out, const std::vector<size_t>& counts, ElemType t,
                      ReduceOp op) override {
    const int P = ctx_->size, r = ctx_->rank;
    const uint32_t tag = next_tag();
    ring_reduce_scatter(P, r, in, out, counts, t, op, work_, recv_,
                        [&](int s, char* send, size_t send_bytes, char* recv, size_t recv_bytes) {
                          std::shared_ptr<gloo::transport::UnboundBuffer> sbuf =
                              ctx_->createUnboundBuffer(send, std::max<size_t>(1, send_bytes));
                          const uint64_t slot = gloo::Slot::build(kReduceScatterSlot, tag) + uint8_t(s);
                          if (send_bytes) sbuf->send((r + 1) % P, slot, 0, send_bytes);
                          if (recv_bytes) {
                            auto rbuf = ctx_->createUnboundBuffer(recv, recv_bytes);
                            rbuf->recv((r + P - 1) % P, slot, 0, recv_bytes);
                            rbuf->waitRecv(timeout_);
                          }
                          return [sbuf, send_bytes, timeout = timeout_] {
                            if (send_bytes) sbuf->waitSend(timeout);
                          };
                        });
    staging_bytes_.store(work_.capacity() + recv_.capacity(), std::memory_order_relaxed);
  }

  void broadcast(void* data, size_t n, ElemType t, int root) override {
    if (n == 0) return;
    gloo::BroadcastOptions o(ctx_);
    o.setOutput<char>(ctx_->createUnboundBuffer(data, n * elem_size(t)));
    o.setRoot(root);
    o.setTag(next_tag());
    o.setTimeout(timeout_);
    gloo::broadcast(o);
  }

  // Gloo copies this rank's own block and exchanges the others pairwise.
  void all_to_all(const void* in, void* out, size_t n, ElemType t) override {
    if (n == 0) return;
    const size_t bytes = n * elem_size(t) * size_t(ctx_->size);
    gloo::AlltoallOptions o(ctx_);
    o.setInput<char>(ctx_->createUnboundBuffer(const_cast<void*>(in), bytes));
    o.setOutput<char>(ctx_->createUnboundBuffer(out, bytes));
    o.setTag(next_tag());
    o.setTimeout(timeout_);
    gloo::alltoall(o);
  }

  // Likewise, in blocks of their own sizes (byte-typed: counts in bytes). Every rank takes part,
  // whatever its counts: an empty block is still an (empty) message its peer waits for.
  void all_to_all_v(const void* in, const std::vector<size_t>& send_counts, void* out,
                    const std::vector<size_t>& recv_counts, ElemType t) override {
    gloo::AlltoallvOptions o(ctx_);
    o.setInput<char>(static_cast<char*>(const_cast<void*>(in)), byte_counts<int64_t>(send_counts, t));
    o.setOutput<char>(static_cast<char*>(out), byte_counts<int64_t>(recv_counts, t));
    o.setTag(next_tag());
    o.setTimeout(timeout_);
    gloo::alltoallv(o);
  }

  std::function<void()> post_send(const void* data, size_t bytes, int dst, uint32_t tag) override {
    std::shared_ptr<gloo::transport::UnboundBuffer> b =
        ctx_->createUnboundBuffer(const_cast<void*>(data), std::max<size_t>(bytes, 1));
    b->send(dst, gloo::Slot::build(kP2pSlot, tag), 0, bytes);
    return [b, t = timeout_] { b->waitSend(t); };
  }

  std::function<void()> post_recv(void* data, size_t bytes, int src, uint32_t tag) override {
    std::shared_ptr<gloo::transport::UnboundBuffer> b = ctx_->createUnboundBuffer(data, std::max<size_t>(bytes, 1));
    b->recv(src, gloo::Slot::build(kP2pSlot, tag), 0, bytes);
    return [b, t = timeout_] { b->waitRecv(t); };
  }

  size_t buffer_bytes() const override { return staging_bytes_.load(std::memory_order_relaxed); }

  void barrier() override {
    gloo::BarrierOptions o(ctx_);
    o.setTag(next_tag());
    o.setTimeout(timeout_);
    gloo::barrier(o);
  }

 private:
  // The typed setter records the element size and count.
  static void set_output(gloo::AllreduceOptions& o, std::unique_ptr<gloo::transport::UnboundBuffer> buf, ElemType t) {
    switch (t) {
      case ElemType::f32:
        return o.setOutput<float>(std::move(buf));
      case ElemType::f64:
        return o.setOutput<double>(std::move(buf));
      case ElemType::i32:
        return o.setOutput<int32_t>(std::move(buf));
      case ElemType::i64:
        return o.setOutput<int64_t>(std::move(buf));
      case ElemType::bf16:
        return o.setOutput<uint16_t>(std::move(buf));
    }
  }
  // Counts of elements as counts of bytes, in the integer type Gloo's option takes.
  template <class I>
  static std::vector<I> byte_counts(const std::vector<size_t>& counts, ElemType t) {
    std::vector<I> bytes(counts.size());
    for (size_t i = 0; i < counts.size(); ++i) bytes[i] = I(counts[i] * elem_size(t));
    return bytes;
  }
  uint32_t next_tag() { return tag_++ & 0x00FFFFFFu; }

  std::shared_ptr<gloo::Context> ctx_;
  Millis timeout_;
  uint32_t tag_ = 1;
  std::vector<char> work_, recv_;         // reduce-scatter: the partials in flight (at most a chunk each)
  std::atomic<size_t> staging_bytes_{0};  // their capacity, for buffer_bytes()
};

}  // namespace

std::shared_ptr<gloo::transport::Device> make_gloo_device(const std::string& address, const std::string& iface) {
  gloo::transport::tcp::attr attr;
  if (!iface.empty()) {
    attr.iface = iface;
  } else {
    // Gloo does not check its own lookup of the name: an unresolvable one would crash it.
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(address.c_str(), nullptr, &hints, &found);
    if (rc == 0) ::freeaddrinfo(found);
    if (rc != 0) {
      const int err = rc == EAI_SYSTEM ? errno : 0;
      throw_if_out_of_descriptors(out_of_descriptors(err) ? err : descriptor_shortage(),
                                  "cannot open the Gloo transport: cannot look up '" + address + "'");
    }
    require(rc == 0, "cannot open the Gloo transport: address '" + address + "' does not resolve (" +
                         gai_strerror(rc) + "): set DTRAIN_SOCKET_IFNAME to the interface the nodes share");
    attr.hostname = address;
  }
  // Its event loop and listening socket; a failure to open them inside Gloo would not say why.
  const std::string doing = "cannot open the Gloo transport";
  require_free_descriptors(2, doing);
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw_if_library_ran_out_of_descriptors(e.what(), doing);
    throw Error("cannot open the Gloo transport on " + (iface.empty() ? "address " + address : "interface " + iface) +
                " (" + e.what() + "): set DTRAIN_SOCKET_IFNAME to the interface the nodes share");
  }
}

std::unique_ptr<Backend> connect_gloo(Store& store, int rank, int size,
                                      const std::shared_ptr<gloo::transport::Device>& device, Millis timeout,
                                      const std::string& group_name) {
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout);
  GlooStore gs(store, timeout, group_name);
  auto dev = device;
  // One socket per peer. Gloo accepts its peers' connections on its own thread, where running out
  // of descriptors would end the process: check first.
  const std::string doing = "process group '" + group_name + "' cannot connect its " + std::to_string(size) + " ranks";
  require_free_descriptors(size - 1, doing);
  try {
    ctx->connectFullMesh(gs, dev);
  } catch (const dtrain::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw_if_library_ran_out_of_descriptors(e.what(), doing);
    throw Error("process group '" + group_name + "' could not connect its " + std::to_string(size) +
                " ranks (" + e.what() + "): check that the nodes can reach each other (DTRAIN_SOCKET_IFNAME)");
  }
  return std::make_unique<GlooBackend>(std::move(ctx), timeout);
}

}  // namespace dtrain
