// The rendezvous endpoint's HOST as dtrun uses it: a network interface of this machine (ib0, lo) or a
// host name (node01i, the InfiniBand name), resolved once at the start to the address used from then on.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// A network interface of this machine as getifaddrs shows it.
struct NetInterface {
  std::string name;
  bool up = false;   // IFF_UP
  std::string ipv4;  // its first IPv4 address; "" when it has none
};
std::vector<NetInterface> list_interfaces();

// HOST's address: itself when it is one; an interface's first IPv4 address when HOST names one of
// `interfaces` and this node hosts the store (on another node, the interface would be that node's
// own); else the host name's first IPv4 address (IPv6 when it has none).
struct ResolvedHost {
  std::string address;
  std::string how;  // "" (HOST is an address), "interface ib0", "resolved once"
};
// Throws Error, one line naming the problem and the fix: an interface that is down or has no IPv4
// address, an interface name on a node that does not host the store, a name that does not resolve.
ResolvedHost resolve_rendezvous_host(const std::string& host, bool hosts_store,
                                     const std::vector<NetInterface>& interfaces);

// "10.0.0.1:29500", "[fe80::1]:29500"
std::string host_port_text(const std::string& host, int port);

}  // namespace dtrain
