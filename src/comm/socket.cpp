// TCP helpers (see socket.hpp).
#include "comm/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "core/descriptors.hpp"
#include "core/error.hpp"
#include "core/whole_number.hpp"

namespace dtrain {

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

// getaddrinfo's result. A lookup that failed for want of a descriptor (the resolver opens files
// and sockets) throws the descriptor-limit line: the name is not at fault.
int resolve(const std::string& host, int port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.list);
  if (rc != 0) {
    const int err = rc == EAI_SYSTEM ? errno : 0;
    throw_if_out_of_descriptors(out_of_descriptors(err) ? err : descriptor_shortage(),
                                "cannot look up '" + (host.empty() ? std::string("*") : host) + "'");
  }
  return rc;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Waits until fd is readable/writable or the deadline passes.
bool wait_fd(int fd, short events, Deadline deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now()).count();
    if (left < 0) return false;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, int(std::min<long long>(left, 1 << 30)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

std::string numeric_address(const sockaddr* a) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, buf, sizeof buf);
  }
  return buf;
}

bool is_loopback(const sockaddr* a) {
  if (a->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  return a->sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
}

// Of the addresses `host` resolves to, the first routable and the first loopback one that this
// machine can bind (its own); gai_error when the name does not resolve.
struct OwnAddresses {
  std::string routable, loopback;
  int gai_error = 0;
};
OwnAddresses own_addresses(const std::string& host) {
  OwnAddresses out;
  AddrInfo ai;
  out.gai_error = resolve(host, 0, false, ai);
  if (out.gai_error != 0) return out;
  for (addrinfo* a = ai.list; a; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) throw_if_out_of_descriptors(errno, "cannot check whether '" + host + "' is an address of this machine");
    if (!s.valid() || ::bind(s.fd(), a->ai_addr, a->ai_addrlen) != 0) continue;  // not this machine's
    std::string& slot = is_loopback(a->ai_addr) ? out.loopback : out.routable;
    if (slot.empty()) slot = numeric_address(a->ai_addr);
  }
  return out;
}

}  // namespace

std::string listen_address(const std::string& host, bool all_local, const std::string& what, bool* foreign) {
  const OwnAddresses own = own_addresses(host);
  require(own.gai_error == 0, what + " " + host + " does not resolve here (" + gai_strerror(own.gai_error) +
                                  "): the store is hosted on this machine, so give its name or address");
  if (foreign) *foreign = own.routable.empty() && own.loopback.empty();
  if (!own.routable.empty()) return own.routable;
  if (own.loopback.empty()) return "";
  unsigned char raw[sizeof(in6_addr)];
  const bool names_loopback = host == "localhost" || inet_pton(AF_INET, host.c_str(), raw) == 1 ||
                              inet_pton(AF_INET6, host.c_str(), raw) == 1;
  return all_local || names_loopback ? own.loopback : "";
}

std::string address_for_peers(const std::string& host_name, bool all_local) {
  const OwnAddresses own = own_addresses(host_name);
  if (!own.routable.empty()) return own.routable;
  if (!own.loopback.empty()) return own.loopback;
  // Interfaces that are up and not loopback, one address each: IPv4, else global IPv6.
  std::vector<std::pair<std::string, std::string>> v4, v6;  // (interface, address)
  auto add = [](auto& list, const std::string& name, const std::string& addr) {
    for (const auto& [n, a] : list)
      if (n == name) return;
    list.emplace_back(name, addr);
  };
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) || !(i->ifa_flags & IFF_RUNNING) || (i->ifa_flags & IFF_LOOPBACK)) {
        continue;
      }
      if (i->ifa_addr->sa_family == AF_INET) {
        add(v4, i->ifa_name, numeric_address(i->ifa_addr));
      } else if (i->ifa_addr->sa_family == AF_INET6 &&
                 !IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr)) {
        add(v6, i->ifa_name, numeric_address(i->ifa_addr));
      }
    }
    ::freeifaddrs(ifs);
  } else {
    throw_if_out_of_descriptors(errno, "cannot list this machine's network interfaces");
  }
  const auto& found = v4.empty() ? v6 : v4;
  if (found.size() == 1) return found[0].second;
  if (all_local) return "127.0.0.1";
  std::string listed;
  for (const auto& [n, a] : found) listed += (listed.empty() ? "" : ", ") + n + " " + a;
  throw Error("host name '" + host_name + "' does not resolve to an address of this machine and " +
              (found.empty()
                   ? std::string("no interface but loopback is up")
                   : std::to_string(found.size()) + " interfaces could reach the other nodes (" + listed + ")") +
              ": set DTRAIN_SOCKET_IFNAME to the interface the nodes share (or fix the name in /etc/hosts or DNS)");
}

Socket tcp_listen(const std::string& host, int port, int backlog) {
  const std::string h = host == "0.0.0.0" ? "" : host;
  AddrInfo ai;
  int rc = resolve(h, port, true, ai);
  require(rc == 0, "cannot resolve listen address '" + host + "': " + gai_strerror(rc));
  std::string last = "no address";
  // Prefer IPv6 wildcard (dual stack) for all interfaces, else the first that binds.
  for (addrinfo* a = ai.list; a; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) {
      throw_if_out_of_descriptors(errno, "cannot open a socket to listen on " + (host.empty() ? std::string("*") : host) +
                                             ":" + std::to_string(port));
      last = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ai_family == AF_INET6) {
      int zero = 0;
      setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    }
    if (::bind(s.fd(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.fd(), backlog) == 0) return s;
    last = std::strerror(errno);
  }
  throw Error("cannot listen on " + (host.empty() ? std::string("*") : host) + ":" + std::to_string(port) +
              " (" + last + "): choose another port (e.g. --rdzv-endpoint HOST:OTHER_PORT or MASTER_PORT)");
}

int socket_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

std::string socket_local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
      inet_ntop(AF_INET, &a6->sin6_addr.s6_addr[12], buf, sizeof buf);
    } else {
      inet_ntop(AF_INET6, &a6->sin6_addr, buf, sizeof buf);
    }
  } else {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  }
  return buf;
}

Socket tcp_connect(const std::string& host, int port, Millis timeout, const std::function<bool()>& give_up) {
  const Deadline deadline = deadline_in(timeout);
  std::string last = "timed out";
  auto backoff = Millis(10);
  for (;;) {
    AddrInfo ai;
    int rc = resolve(host, port, false, ai);
    if (rc != 0) {
      last = std::string("cannot resolve host: ") + gai_strerror(rc);
    } else {
      for (addrinfo* a = ai.list; a; a = a->ai_next) {
        Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
        if (!s.valid()) {  // out of descriptors: waiting frees none (other families: try the next address)
          throw_if_out_of_descriptors(errno, "cannot open a socket to connect to " + host + ":" + std::to_string(port));
          last = std::strerror(errno);
          continue;
        }
        int flags = fcntl(s.fd(), F_GETFL);
        fcntl(s.fd(), F_SETFL, flags | O_NONBLOCK);
        int r = ::connect(s.fd(), a->ai_addr, a->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
          const Deadline attempt = std::min(deadline, deadline_in(Millis(2000)));
          if (wait_fd(s.fd(), POLLOUT, attempt)) {
            int err = 0;
            socklen_t el = sizeof err;
            getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &el);
            r = err == 0 ? 0 : -1;
            errno = err;
          } else {
            errno = ETIMEDOUT;
          }
        }
        if (r == 0) {
          fcntl(s.fd(), F_SETFL, flags);
          set_nodelay(s.fd());
          return s;
        }
        last = std::strerror(errno);
      }
    }
    if (std::chrono::steady_clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    require(!give_up || !give_up(), "stopped while connecting to " + host + ":" + std::to_string(port));
    backoff = std::min(backoff * 2, Millis(500));
  }
  throw Error("cannot connect to " + host + ":" + std::to_string(port) + " within " +
              std::to_string(timeout.count() / 1000.0).substr(0, 5) + " s (" + last +
              "): check that the master/rendezvous host is up and the address and port are right");
}

bool send_all(int fd, const void* data, size_t n, Deadline deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= size_t(w);
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_fd(fd, POLLOUT, deadline)) return false;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

bool recv_all(int fd, void* data, size_t n, Deadline deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLIN, deadline)) return false;
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= size_t(r);
    } else if (r == 0) {
      return false;  // peer closed
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return false;
    }
  }
  return true;
}

std::pair<std::string, int> parse_host_port(const std::string& s, const std::string& what, bool any_port) {
  std::string host;
  std::string port;
  if (!s.empty() && s[0] == '[') {
    auto close = s.find(']');
    if (close != std::string::npos && close + 1 < s.size() && s[close + 1] == ':') {
      host = s.substr(1, close - 1);
      port = s.substr(close + 2);
    }
  } else {
    auto colon = s.rfind(':');
    if (colon != std::string::npos) {
      host = s.substr(0, colon);
      port = s.substr(colon + 1);
    }
  }
  const bool digits = !port.empty() && std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  require(!host.empty() && digits, what + " '" + s + "' is not HOST:PORT (e.g. node001:29500)");
  const auto p = parse_whole(port, any_port ? 0 : 1, 65535);
  require(p.has_value(), what + " '" + s + "': the port must be from 1 to 65535" +
                             (parse_whole(port, 0, 0) ? " (port 0 means \"any free port\", which no one can connect to; "
                                                        "dtrun --standalone picks a free one itself)"
                                                      : ""));
  return {host, int(*p)};
}

}  // namespace dtrain
