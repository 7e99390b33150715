// Resolving --rdzv-endpoint's HOST (see endpoint.hpp).
#include "launch/endpoint.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/descriptors.hpp"
#include "core/error.hpp"

namespace dtrain {

namespace {

bool is_address(const std::string& host) {
  unsigned char raw[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), raw) == 1 || inet_pton(AF_INET6, host.c_str(), raw) == 1;
}

std::string text_of(const sockaddr* a) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, buf, sizeof buf);
  else
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, buf, sizeof buf);
  return buf;
}

// The host name's first IPv4 address, else its first IPv6 one; "" and *error when it does not resolve.
std::string lookup(const std::string& host, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &list);
  if (rc != 0) {
    if (rc == EAI_SYSTEM) throw_if_out_of_descriptors(errno, "cannot look up '" + host + "'");
    *error = gai_strerror(rc);
    return "";
  }
  std::string v4, v6;
  for (addrinfo* a = list; a; a = a->ai_next) {
    std::string& slot = a->ai_family == AF_INET ? v4 : v6;
    if (slot.empty() && (a->ai_family == AF_INET || a->ai_family == AF_INET6)) slot = text_of(a->ai_addr);
  }
  freeaddrinfo(list);
  return v4.empty() ? v6 : v4;
}

std::string interface_names(const std::vector<NetInterface>& interfaces) {
  std::string s;
  for (const NetInterface& i : interfaces) s += (s.empty() ? "" : ", ") + i.name;
  return s;
}

// The address of interface `i`, named by --rdzv-endpoint: one line when it is down or has none.
std::string address_of(const NetInterface& i) {
  const std::string what = "--rdzv-endpoint host " + i.name + " is a network interface of this machine";
  require(i.up, what + ", but it is down: bring it up (ip link set " + i.name + " up) or give another interface, "
                       "a host name or an address");
  require(!i.ipv4.empty(), what + " with no IPv4 address (it is up): give an interface that has one, a host name "
                                  "or an address");
  return i.ipv4;
}

}  // namespace

std::vector<NetInterface> list_interfaces() {
  std::vector<NetInterface> out;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) {
    throw_if_out_of_descriptors(errno, "cannot list this machine's network interfaces");
    return out;
  }
  for (ifaddrs* a = ifs; a; a = a->ifa_next) {
    auto it = std::find_if(out.begin(), out.end(), [&](const NetInterface& i) { return i.name == a->ifa_name; });
    if (it == out.end()) it = out.insert(out.end(), NetInterface{a->ifa_name, false, ""});
    it->up = it->up || (a->ifa_flags & IFF_UP);
    if (it->ipv4.empty() && a->ifa_addr && a->ifa_addr->sa_family == AF_INET) it->ipv4 = text_of(a->ifa_addr);
  }
  ::freeifaddrs(ifs);
  return out;
}

ResolvedHost resolve_rendezvous_host(const std::string& host, bool hosts_store,
                                     const std::vector<NetInterface>& interfaces) {
  if (is_address(host)) return {host, ""};
  const auto it = std::find_if(interfaces.begin(), interfaces.end(), [&](const NetInterface& i) { return i.name == host; });
  const bool interface = it != interfaces.end();
  if (interface && hosts_store) return {address_of(*it), "interface " + host};
  std::string error;
  const std::string address = lookup(host, &error);
  if (!address.empty()) return {address, "resolved once"};
  require(!interface, "--rdzv-endpoint host " + host + " is a network interface of this machine, which does not host "
                          "the store, and no host name: on this node give the name or address of the node that "
                          "hosts it");
  throw Error("--rdzv-endpoint host " + host + " does not resolve here (" + error + ") and is no network interface " +
              "of this machine (" + interface_names(interfaces) + "): give a host name, an address, or an interface of " +
              "the node that hosts the store");
}

std::string host_port_text(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace dtrain
