// dtrun's --rdzv-endpoint HOST resolved once: an address as it is, an interface of this machine (on
// the node that hosts the store) by its IPv4 address, a host name by its first IPv4 address, and one
// line naming the problem and the fix for an interface that is down or has no address, an interface
// name on another node, or a name that is neither.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error_of.hpp"
#include "launch/endpoint.hpp"

using namespace dtrain;

namespace {

// A machine with loopback, an InfiniBand interface that is up, one that is down and one with no IPv4
// address; "localhost" names an interface too here (a name both an interface and a host).
const std::vector<NetInterface> kInterfaces = {{"lo", true, "127.0.0.1"},
                                               {"ib0", true, "10.2.3.4"},
                                               {"ib1", false, "10.2.4.4"},
                                               {"eth6", true, ""},
                                               {"localhost", true, "10.9.9.9"}};

void expect_one_line(const std::string& host, bool hosting, const std::string& needle) {
  const std::string e = error_of([&] { resolve_rendezvous_host(host, hosting, kInterfaces); });
  EXPECT_NE(e.find(needle), std::string::npos) << host << ": " << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace

TEST(RendezvousHost, AddressesAreTakenAsTheyAre) {
  for (const char* a : {"127.0.0.1", "10.1.2.3", "::1", "fe80::1"}) {
    const ResolvedHost r = resolve_rendezvous_host(a, true, kInterfaces);
    EXPECT_EQ(r.address, a);
    EXPECT_EQ(r.how, "");
  }
}

TEST(RendezvousHost, AnInterfaceOfTheNodeThatHostsTheStore) {
  ResolvedHost r = resolve_rendezvous_host("ib0", true, kInterfaces);
  EXPECT_EQ(r.address, "10.2.3.4");
  EXPECT_EQ(r.how, "interface ib0");
  expect_one_line("ib1", true, "--rdzv-endpoint host ib1 is a network interface of this machine, but it is down: "
                               "bring it up (ip link set ib1 up)");
  expect_one_line("eth6", true, "eth6 is a network interface of this machine with no IPv4 address (it is up)");
}

TEST(RendezvousHost, ANameThatIsBothIsTheInterfaceOnlyOnTheHost) {
  EXPECT_EQ(resolve_rendezvous_host("localhost", true, kInterfaces).address, "10.9.9.9");
  const ResolvedHost r = resolve_rendezvous_host("localhost", false, kInterfaces);
  EXPECT_EQ(r.address, "127.0.0.1");  // IPv4 first, though localhost may resolve to ::1 too
  EXPECT_EQ(r.how, "resolved once");
}

TEST(RendezvousHost, NamesThatAreNeither) {
  // On a node that does not host the store, the interface would be that node's own.
  expect_one_line("lo", false, "--rdzv-endpoint host lo is a network interface of this machine, which does not");
  expect_one_line("ib0", false, "ib0 is a network interface of this machine, which does not host the store, and no "
                                "host name: on this node give the name or address of the node that hosts it");
  expect_one_line("ib9zz.invalid", true, "--rdzv-endpoint host ib9zz.invalid does not resolve here (");
  expect_one_line("ib9zz.invalid", false, "is no network interface of this machine (lo, ib0, ib1, eth6, localhost)");
}

TEST(RendezvousHost, ThisMachinesInterfacesIncludeLoopback) {
  bool lo = false;
  for (const NetInterface& i : list_interfaces()) lo = lo || (i.name == "lo" && i.up && i.ipv4 == "127.0.0.1");
  if (!lo) GTEST_SKIP() << "no loopback interface lo with 127.0.0.1 here";
  EXPECT_EQ(resolve_rendezvous_host("lo", true, list_interfaces()).address, "127.0.0.1");
  EXPECT_EQ(host_port_text("fe80::1", 29500), "[fe80::1]:29500");
  EXPECT_EQ(host_port_text("10.0.0.1", 29500), "10.0.0.1:29500");
}
