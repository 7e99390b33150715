// Gloo backend (see gloo_backend.hpp). Collectives use Gloo's option-based API only (mixing in
// its older algorithm classes on one context slows it down); reduce-scatter and point-to-point
// run over unbound buffers.
#include "comm/gloo_backend.hpp"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <netdb.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/bf16.hpp"
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

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::min:
      return &gloo::min<T>;
    case ReduceOp::max:
      return &gloo::max<T>;
    default:
      return &gloo::sum<T>;
  }
}

// bf16 elements reduce through f32, each result rounded back to bf16.
template <float (*Op)(float, float)>
void bf16_reduce(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<uint16_t*>(c);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = to_bf16(Op(to_f32(bf16{x[i]}), to_f32(bf16{y[i]}))).bits;
}
float add_f(float a, float b) { return a + b; }
float min_f(float a, float b) { return std::min(a, b); }
float max_f(float a, float b) { return std::max(a, b); }

ReduceFn reduce_fn(ElemType t, ReduceOp op) {
  switch (t) {
    case ElemType::bf16:
      return op == ReduceOp::min ? &bf16_reduce<min_f> : op == ReduceOp::max ? &bf16_reduce<max_f> : &bf16_reduce<add_f>;
    case ElemType::f32:
      return reduce_fn<float>(op);
    case ElemType::f64:
      return reduce_fn<double>(op);
    case ElemType::i32:
      return reduce_fn<int32_t>(op);
    case ElemType::i64:
      return reduce_fn<int64_t>(op);
  }
  return nullptr;
}

void scale(void* data, size_t n, ElemType t, double s) {
  if (t == ElemType::bf16) {
    uint16_t* p = static_cast<uint16_t*>(data);
    for (size_t i = 0; i < n; ++i) p[i] = to_bf16(float(to_f32(bf16{p[i]}) * s)).bits;
  } else if (t == ElemType::f32) {
    float* p = static_cast<float*>(data);
    for (size_t i = 0; i < n; ++i) p[i] = float(p[i] * s);
  } else {
    double* p = static_cast<double*>(data);
    for (size_t i = 0; i < n; ++i) p[i] *= s;
  }
}

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
    if (op == ReduceOp::avg) scale(data, n, t, 1.0 / ctx_->size);
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
      // byte-typed: counts in bytes
      std::vector<size_t> bytes(counts.size());
      for (size_t i = 0; i < counts.size(); ++i) bytes[i] = counts[i] * es;
      o.setInput<char>(static_cast<char*>(const_cast<void*>(in)), bytes[size_t(ctx_->rank)]);
      o.setOutput<char>(static_cast<char*>(out), bytes);
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::allgatherv(o);
    }
  }

  // Ring reduce-scatter: P-1 steps; at step s rank r passes its partial sum of chunk r-s-1 on
  // to rank r+1 and adds its own part of chunk r-s-2 to the partial arriving from rank r-1. Only one
  // partial is ever sent while the next arrives, so the working space is two chunks, not a copy of
  // the input: the last step's partial is received straight into `out` and the others alternate
  // between `out` (when it is large enough and apart from the input) and one staging chunk (or two).
  void reduce_scatter(const void* in, void* out, const std::vector<size_t>& counts, ElemType t,
                      ReduceOp op) override {
    const int P = ctx_->size, r = ctx_->rank;
    const size_t es = elem_size(t);
    std::vector<size_t> off(counts.size() + 1, 0);
    for (size_t i = 0; i < counts.size(); ++i) off[i + 1] = off[i] + counts[i];
    const char* src = static_cast<const char*>(in);
    if (P == 1) {
      if (out != in) std::memmove(out, in, counts[0] * es);
      return;
    }
    auto chunk = [&](int c) { return size_t(((c % P) + P) % P); };
    size_t max_chunk = 0;
    for (size_t c : counts) max_chunk = std::max(max_chunk, c);
    char* dst = static_cast<char*>(out);
    const bool out_apart = dst + counts[size_t(r)] * es <= src || src + off.back() * es <= dst;
    // where step s receives: the last step into out; going back, the others alternate
    std::vector<char*> at(size_t(P - 1));
    const bool out_fits = out_apart && counts[size_t(r)] == max_chunk;
    const size_t staging = out_fits ? 1 : 2;  // P = 2: none is used
    if (P > 2) grow_staging(staging * std::max<size_t>(1, max_chunk * es));
    for (int s = P - 2, k = 0; s >= 0; --s, ++k) {
      if (s == P - 2 && out_apart) at[size_t(s)] = dst;
      else if (k % 2 == 0 && out_fits) at[size_t(s)] = dst;
      else at[size_t(s)] = staging_.data() + (out_fits ? 0 : size_t(k % 2)) * max_chunk * es;
    }
    if (!out_apart) {  // out overlaps the input: the last step lands in staging and is copied out
      grow_staging(2 * std::max<size_t>(1, max_chunk * es));
      for (int s = P - 2, k = 0; s >= 0; --s, ++k) at[size_t(s)] = staging_.data() + size_t(k % 2) * max_chunk * es;
    }
    const uint32_t tag = next_tag();
    ReduceFn fn = reduce_fn(t, op);
    for (int s = 0; s < P - 1; ++s) {
      const size_t cs = chunk(r - s - 1), cr = chunk(r - s - 2);
      // step 0 sends this rank's own part; later steps the partial the previous step made
      const char* send = s == 0 ? src + off[cs] * es : at[size_t(s - 1)];
      char* recv = at[size_t(s)];
      auto sbuf = ctx_->createUnboundBuffer(const_cast<char*>(send), std::max<size_t>(1, counts[cs] * es));
      auto rbuf = ctx_->createUnboundBuffer(recv, std::max<size_t>(1, counts[cr] * es));
      const uint64_t slot = gloo::Slot::build(kReduceScatterSlot, tag) + uint8_t(s);
      if (counts[cs]) sbuf->send((r + 1) % P, slot, 0, counts[cs] * es);
      if (counts[cr]) {
        rbuf->recv((r + P - 1) % P, slot, 0, counts[cr] * es);
        rbuf->waitRecv(timeout_);
        fn(recv, src + off[cr] * es, recv, counts[cr]);  // this rank's part + the partial received
      }
      if (counts[cs]) sbuf->waitSend(timeout_);
    }
    if (at[size_t(P - 2)] != dst) std::memcpy(dst, at[size_t(P - 2)], counts[size_t(r)] * es);
    if (op == ReduceOp::avg) scale(out, counts[size_t(r)], t, 1.0 / P);
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
  uint32_t next_tag() { return tag_++ & 0x00FFFFFFu; }

  std::shared_ptr<gloo::Context> ctx_;
  Millis timeout_;
  uint32_t tag_ = 1;
  void grow_staging(size_t bytes) {
    if (bytes > staging_.size()) staging_.resize(bytes);
    staging_bytes_.store(staging_.capacity(), std::memory_order_relaxed);
  }
  std::vector<char> staging_;  // reduce-scatter: the partials in flight (at most two chunks)
  std::atomic<size_t> staging_bytes_{0};  // its capacity, for buffer_bytes()
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
