// The TCP store's server (see tcp_store.hpp). One poll loop serves every connection; a WAIT is
// parked on the server until its keys exist or its timeout passes; a refusal closes lingering.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "comm/tcp_store.hpp"
#include "comm/tcp_store_wire.hpp"
#include "core/descriptors.hpp"
#include "core/error.hpp"

namespace dtrain {

using namespace tcp_store_wire;

namespace {

using Clock = std::chrono::steady_clock;

// A refusal closes lingering: the server sends the reason, stops writing (SHUT_WR), then reads
// and discards what the client still sends, for so long and so many bytes past the refused
// message, before it closes (a client still sending would otherwise get a reset, not the reason).
constexpr Millis kLinger{5000};
constexpr size_t kLingerSlack = 64 << 10;
constexpr size_t kMaxLinger = size_t(1) << 30;

}  // namespace

struct TcpStoreServer::Impl {
  struct Conn {
    Socket sock;
    std::string in, out;
    bool authed = false;
    bool closing = false;    // refused: flush `out`, then linger
    bool lingering = false;  // `out` flushed and our side shut: discard input until EOF or the limits below
    size_t linger_left = 0;  // bytes still to discard
    Clock::time_point linger_deadline;  // closed then, whatever is left
    Clock::time_point hello_deadline;
    bool waiting = false;
    std::vector<std::string> wait_keys;
    Clock::time_point wait_deadline;
  };

  TcpStoreServer& owner;
  std::string token;
  TcpStoreLimits limits;
  Socket listener;
  int wake[2] = {-1, -1};
  std::thread thread;
  std::unordered_map<std::string, std::string> data;
  std::vector<std::unique_ptr<Conn>> conns;  // in the order accepted
  Clock::time_point accept_paused_until{};   // out of descriptors with none to shed
  bool warned_out_of_fds = false;

  Impl(TcpStoreServer& o, std::string t, TcpStoreLimits l) : owner(o), token(std::move(t)), limits(l) {}

  // Refuses the connection with `why`; `still_coming` = bytes the client announced and has not
  // sent yet (discarded in the lingering close).
  void reject(Conn& c, const std::string& why, size_t still_coming = 0) {
    owner.rejected_++;
    c.out += frame(kFail, why);
    c.closing = true;
    c.linger_left = std::min(still_coming, kMaxLinger) + kLingerSlack;
    c.linger_deadline = Clock::now() + kLinger;  // for reading the reason too
    c.in.clear();
  }

  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> m;
    for (const auto& k : keys)
      if (!data.count(k)) m.push_back(k);
    return m;
  }

  void finish_wait(Conn& c, bool timed_out) {
    std::string payload;
    if (timed_out) {
      auto m = missing(c.wait_keys);
      put_u32(payload, uint32_t(m.size()));
      for (const auto& k : m) put_str(payload, k);
    }
    c.out += frame(timed_out ? kMissing : kOk, payload);
    c.waiting = false;
    c.wait_keys.clear();
  }

  void wake_waiters() {
    for (auto& c : conns)
      if (c->waiting && missing(c->wait_keys).empty()) finish_wait(*c, false);
  }

  void handle(Conn& c, uint8_t op, const char* p, size_t n) {
    Reader r{p, n};
    owner.served_++;
    switch (op) {
      case kSet: {
        std::string k = r.str(limits.max_key);
        std::string v = r.rest();
        if (!r.good) return reject(c, "malformed SET request");
        data[k] = std::move(v);
        c.out += frame(kOk, "");
        return wake_waiters();
      }
      case kGet: {
        std::string k = r.str(limits.max_key);
        if (!r.good || r.left) return reject(c, "malformed GET request");
        auto it = data.find(k);
        c.out += it == data.end() ? frame(kMissing, "") : frame(kOk, it->second);
        return;
      }
      case kAdd: {
        std::string k = r.str(limits.max_key);
        int64_t delta = r.i64();
        if (!r.good || r.left) return reject(c, "malformed ADD request");
        int64_t cur = 0;
        auto it = data.find(k);
        if (it != data.end()) {
          if (it->second.size() != 8) return reject(c, "ADD on key '" + k + "' that holds a non-counter value");
          std::memcpy(&cur, it->second.data(), 8);
        }
        cur += delta;
        data[k] = std::string(reinterpret_cast<const char*>(&cur), 8);
        std::string out;
        put_i64(out, cur);
        c.out += frame(kOk, out);
        return wake_waiters();
      }
      case kWait: {
        int64_t ms = r.i64();
        uint32_t count = r.u32();
        if (!r.good || count > 1u << 20) return reject(c, "malformed WAIT request");
        std::vector<std::string> keys;
        for (uint32_t i = 0; i < count && r.good; ++i) keys.push_back(r.str(limits.max_key));
        if (!r.good || r.left || ms < 0) return reject(c, "malformed WAIT request");
        c.waiting = true;
        c.wait_keys = std::move(keys);
        c.wait_deadline = Clock::now() + clamp_wait(Millis(ms));  // a longer one would overflow the clock
        if (missing(c.wait_keys).empty()) finish_wait(c, false);
        return;
      }
      case kDel: {
        std::string k = r.str(limits.max_key);
        if (!r.good || r.left) return reject(c, "malformed DEL request");
        data.erase(k);
        c.out += frame(kOk, "");
        return;
      }
      default:
        return reject(c, "unknown request " + std::to_string(op));
    }
  }

  // Consumes complete messages from c.in.
  void parse(Conn& c) {
    while (!c.closing && !c.waiting) {
      if (!c.authed) {
        if (c.in.size() < 8) return;
        if (std::memcmp(c.in.data(), kMagic, 4) != 0) return reject(c, "not a dtrain store client");
        uint32_t tl;
        std::memcpy(&tl, c.in.data() + 4, 4);
        if (tl > kMaxToken) return reject(c, "job token too long");
        if (c.in.size() < 8 + tl) return;
        if (!tokens_equal(c.in.substr(8, tl), token)) {
          return reject(c, "wrong job token: this store belongs to another job (set DTRAIN_JOB_TOKEN to the "
                           "job's token)");
        }
        c.in.erase(0, 8 + tl);
        c.authed = true;
        c.out += frame(kOk, "");
        continue;
      }
      if (c.in.size() < 5) return;
      uint32_t len;
      std::memcpy(&len, c.in.data() + 1, 4);
      if (len > limits.max_message) {
        return reject(c,
                      "message of " + std::to_string(len) + " bytes exceeds the store's limit of " +
                          std::to_string(limits.max_message),
                      len - std::min<size_t>(len, c.in.size() - 5));
      }
      if (c.in.size() < 5 + size_t(len)) return;
      const uint8_t op = uint8_t(c.in[0]);
      std::string msg = c.in.substr(5, len);
      c.in.erase(0, 5 + size_t(len));
      handle(c, op, msg.data(), msg.size());
    }
  }

  // Sends what is queued; false when the connection should be dropped. A refused one, once its
  // reason is out, shuts its sending side and lingers.
  bool flush(Conn& c) {
    while (!c.out.empty()) {
      ssize_t w = ::send(c.sock.fd(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        c.out.erase(0, size_t(w));
      } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return true;
      } else {
        return false;
      }
    }
    if (c.closing && !c.lingering) {
      if (::shutdown(c.sock.fd(), SHUT_WR) != 0) return false;
      c.lingering = true;
    }
    return true;
  }

  // A refused connection's input: read and dropped; false once the client is done (EOF) or has sent
  // more than it announced.
  bool discard(Conn& c) {
    char buf[65536];
    for (;;) {
      ssize_t r = ::recv(c.sock.fd(), buf, sizeof buf, MSG_DONTWAIT);
      if (r > 0) {
        if (size_t(r) >= c.linger_left) return false;
        c.linger_left -= size_t(r);
      } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return true;
      } else {
        return false;
      }
    }
  }

  // Reads what is available; false when the connection should be dropped.
  bool read(Conn& c) {
    if (c.closing) return discard(c);
    char buf[65536];
    for (;;) {
      ssize_t r = ::recv(c.sock.fd(), buf, sizeof buf, MSG_DONTWAIT);
      if (r > 0) {
        c.in.append(buf, size_t(r));
        // A sender that streams more than one message's worth without a reply is misbehaving.
        if (c.in.size() > limits.max_message + 16 + (c.authed ? 0 : kMaxToken)) {
          if (!c.authed) {
            reject(c, "not a dtrain store client");
          } else {
            parse(c);
            if (c.in.size() > limits.max_message + 16) reject(c, "message exceeds the store's limit");
          }
          return true;
        }
        if (size_t(r) < sizeof buf) break;
      } else if (r == 0) {
        return false;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        break;
      } else {
        return false;
      }
    }
    parse(c);
    return true;
  }

  void serve() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({wake[0], POLLIN, 0});
      auto now = Clock::now();
      auto next = now + Millis(1000);
      const bool accepting = now >= accept_paused_until;
      fds.push_back({listener.fd(), short(accepting ? POLLIN : 0), 0});
      if (!accepting) next = std::min(next, accept_paused_until);
      for (auto& c : conns) {
        short ev = POLLIN;
        if (!c->out.empty()) ev |= POLLOUT;
        fds.push_back({c->sock.fd(), ev, 0});
        if (!c->authed && !c->closing) next = std::min(next, c->hello_deadline);
        if (c->closing) next = std::min(next, c->linger_deadline);
        if (c->waiting) next = std::min(next, c->wait_deadline);
      }
      int ms = int(std::max<int64_t>(0, std::chrono::duration_cast<Millis>(next - now).count()) + 1);
      int r = ::poll(fds.data(), fds.size(), ms);
      if (r < 0 && errno != EINTR) break;
      if (fds[0].revents) return;  // stop requested
      now = Clock::now();
      std::vector<bool> keep(conns.size(), true);
      for (size_t i = 0; i < conns.size(); ++i) {
        Conn& c = *conns[i];
        const short re = fds[i + 2].revents;
        if (re & (POLLIN | POLLHUP | POLLERR)) keep[i] = read(c);
        if (keep[i] && !c.authed && now >= c.hello_deadline && !c.closing) reject(c, "no hello in time");
        if (keep[i] && c.waiting && now >= c.wait_deadline) finish_wait(c, true);
        if (keep[i] && c.closing && now >= c.linger_deadline) keep[i] = false;
      }
      for (size_t i = 0; i < conns.size(); ++i) {
        if (keep[i]) keep[i] = flush(*conns[i]);
        if (keep[i] && conns[i]->waiting == false && !conns[i]->in.empty() && !conns[i]->closing) parse(*conns[i]);
        if (keep[i]) keep[i] = flush(*conns[i]);
      }
      std::vector<std::unique_ptr<Conn>> alive;
      for (size_t i = 0; i < conns.size(); ++i)
        if (keep[i]) alive.push_back(std::move(conns[i]));
      conns.swap(alive);
      if (fds[1].revents & POLLIN) accept_new();
    }
  }

  // Accepts what is pending, a bounded number per turn so that those accepted get read. Out of
  // descriptors with a connection pending, it closes the oldest connection that has had a turn
  // to prove the token and has not: idle or hostile connections cannot keep a real client out.
  // With none to close it stops watching the listener for a moment (the pending connection keeps
  // it readable: watching it would spin).
  void accept_new() {
    size_t had_a_turn = conns.size();
    for (int turn = 0; turn < 256; ++turn) {
      int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        const int err = errno;
        if (err == EINTR || err == ECONNABORTED) continue;
        if ((err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) && connection_pending()) {
          if (shed_oldest_unauthenticated(had_a_turn)) {
            --had_a_turn;
            continue;
          }
          accept_paused_until = Clock::now() + Millis(200);
          const bool all_authed = std::all_of(conns.begin(), conns.end(), [](const auto& c) { return c->authed; });
          if (all_authed && !warned_out_of_fds) {
            warned_out_of_fds = true;
            const std::string why = out_of_descriptors(err)
                                        ? descriptor_limit_problem(err)
                                        : std::string("the kernel is out of memory for sockets (") +
                                              std::strerror(err) + "): free memory on this machine";
            std::fprintf(stderr,
                         "dtrain: warning: the store on port %d cannot accept a connection (%zu connected): %s\n",
                         owner.port(), conns.size(), why.c_str());
          }
        }
        return;
      }
      auto c = std::make_unique<Conn>();
      c->sock = Socket(fd);
      c->hello_deadline = Clock::now() + limits.hello_timeout;
      conns.push_back(std::move(c));
    }
  }

  // Linux reports EMFILE before it looks for a pending connection.
  bool connection_pending() const {
    pollfd p{listener.fd(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
  }

  // Closes the oldest unauthenticated (or refused) connection among the first `among`.
  bool shed_oldest_unauthenticated(size_t among) {
    for (size_t i = 0; i < among; ++i) {
      if (conns[i]->authed && !conns[i]->closing) continue;
      owner.rejected_++;
      conns.erase(conns.begin() + std::ptrdiff_t(i));  // closes it
      return true;
    }
    return false;
  }
};

TcpStoreServer::TcpStoreServer(const std::string& host, int port, std::string token, TcpStoreLimits limits)
    : impl_(std::make_unique<Impl>(*this, std::move(token), limits)) {
  impl_->listener = tcp_listen(host, port);
  port_ = socket_port(impl_->listener.fd());
  if (::pipe2(impl_->wake, O_CLOEXEC) != 0) {
    throw_if_out_of_descriptors(errno, "cannot start the store server on port " + std::to_string(port_));
    throw Error(std::string("cannot create a pipe for the store server: ") + std::strerror(errno));
  }
  fcntl(impl_->listener.fd(), F_SETFL, fcntl(impl_->listener.fd(), F_GETFL) | O_NONBLOCK);
  impl_->thread = std::thread([this] { impl_->serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  char b = 1;
  (void)!::write(impl_->wake[1], &b, 1);
  impl_->thread.join();
  ::close(impl_->wake[0]);
  ::close(impl_->wake[1]);
}

}  // namespace dtrain
