// Small blocking TCP helpers with deadlines (listen, connect with retry, exact reads/writes) for
// the store, the launcher's rendezvous and tests. IPv4 and IPv6; errors are dtrain::Error.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace dtrain {

using Millis = std::chrono::milliseconds;

// An owned socket descriptor (closed on destruction).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept;
  ~Socket() { close(); }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void close();

 private:
  int fd_ = -1;
};

// Listens on host:port (host "" or "0.0.0.0" = all interfaces, port 0 = any free port).
Socket tcp_listen(const std::string& host, int port, int backlog = 128);
int socket_port(int fd);                 // the local port a socket is bound to
std::string socket_local_address(int fd);  // the local IP address of a connected socket

// Where a store hosted for the address `host` listens: host's address when it is one of this
// machine's (loopback for 127.0.0.1), else "" (all addresses). When other machines take part
// (!all_local), a name that resolves here to loopback only (/etc/hosts' "127.0.1.1 node01") also
// means all addresses: they reach this one by its real address. `what` names the setting in the
// error for a host that does not resolve; *foreign says host is not this machine's at all.
std::string listen_address(const std::string& host, bool all_local, const std::string& what, bool* foreign = nullptr);

// The address peers can reach this machine on when no connection to the store shows one (file
// store): the host name's address when it resolves to one of this machine; else the address of
// the one non-loopback interface that is up; else loopback when every rank runs here
// (`all_local`). Throws one line naming DTRAIN_SOCKET_IFNAME when it cannot choose.
std::string address_for_peers(const std::string& host_name, bool all_local);

// Connects to host:port, retrying refused/unreachable attempts until `timeout` has passed.
// `give_up`, when given, is asked between attempts: true stops the wait with an Error (a signal).
Socket tcp_connect(const std::string& host, int port, Millis timeout,
                   const std::function<bool()>& give_up = nullptr);

// The longest wait a timeout stands for (ten years): longer ones (parallel.timeout_s = 1e15) are
// cut to it so that no deadline overflows the clock, and negative ones count as none.
constexpr Millis kLongestWait{int64_t(10) * 366 * 24 * 3600 * 1000};
inline Millis clamp_wait(Millis t) { return std::clamp(t, Millis(0), kLongestWait); }

// Sends/receives exactly n bytes before the deadline; false on timeout or a closed peer.
using Deadline = std::chrono::steady_clock::time_point;
bool send_all(int fd, const void* data, size_t n, Deadline deadline);
bool recv_all(int fd, void* data, size_t n, Deadline deadline);
inline Deadline deadline_in(Millis t) { return std::chrono::steady_clock::now() + clamp_wait(t); }

// "host:port" → (host, port); "[v6]:port" too. Throws naming `what` when malformed or when the
// port is not from 1 to 65535; port 0 ("any free port") only with `any_port` (an address to
// listen on, not one to connect to).
std::pair<std::string, int> parse_host_port(const std::string& s, const std::string& what, bool any_port = false);

}  // namespace dtrain
