// The TCP and file stores: set/get/add/wait semantics, timeouts that name missing keys, job
// tokens, and a server that survives garbage, oversized and unauthenticated clients.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "comm/file_store.hpp"
#include "comm/socket.hpp"
#include "comm/tcp_store.hpp"
#include "error_of.hpp"

using namespace dtrain;

namespace {

void exercise(Store& s, Store& other) {
  s.set("a", std::string("x\0y", 3));
  EXPECT_EQ(*other.try_get("a"), std::string("x\0y", 3));
  EXPECT_FALSE(other.try_get("nope").has_value());
  EXPECT_EQ(s.add("n", 5), 5);
  EXPECT_EQ(other.add("n", -2), 3);
  EXPECT_EQ(s.wait({"a", "n"}, Millis(10)).size(), 0u);
  auto missing = s.wait({"a", "b", "c"}, Millis(50));
  EXPECT_EQ(missing, (std::vector<std::string>{"b", "c"}));
  std::thread later([&] {
    std::this_thread::sleep_for(Millis(100));
    other.set("late", "v");
  });
  EXPECT_EQ(s.get("late", Millis(5000)), "v");  // a parked wait wakes when the key appears
  later.join();
  EXPECT_NE(error_of([&] { s.get("never", Millis(50), "rendezvous"); }).find("'never' (rendezvous)"), std::string::npos);
  s.erase("a");
  EXPECT_FALSE(other.try_get("a").has_value());
  PrefixStore p1(s.clone(), "round1/"), p2(other.clone(), "round2/");
  p1.set("k", "1");
  EXPECT_FALSE(p2.try_get("k").has_value());
  EXPECT_EQ(*s.try_get("round1/k"), "1");
}

// A raw connection that sends bytes and reports whether the server then closed it.
bool server_closes_after(int port, const std::string& bytes) {
  Socket c = tcp_connect("127.0.0.1", port, Millis(2000));
  send_all(c.fd(), bytes.data(), bytes.size(), deadline_in(Millis(2000)));
  char buf[4096];
  auto d = deadline_in(Millis(5000));
  while (std::chrono::steady_clock::now() < d) {
    ssize_t r = recv(c.fd(), buf, sizeof buf, 0);
    if (r == 0) return true;
    if (r < 0) return errno == ECONNRESET;
  }
  return false;
}

std::string hello(const std::string& token) {
  std::string h = "DTS1";
  uint32_t n = uint32_t(token.size());
  h.append(reinterpret_cast<const char*>(&n), 4);
  return h + token;
}

}  // namespace

TEST(TcpStore, SetGetAddWaitAcrossClients) {
  TcpStoreServer server("127.0.0.1", 0, "tok");
  TcpStore a("127.0.0.1", server.port(), "tok", Millis(2000)), b("127.0.0.1", server.port(), "tok", Millis(2000));
  exercise(a, b);
  EXPECT_EQ(a.local_address(), "127.0.0.1");
}

TEST(TcpStore, WrongTokenIsRefusedAndTheServerKeepsServing) {
  TcpStoreServer server("127.0.0.1", 0, "right");
  const std::string e = error_of([&] { TcpStore bad("127.0.0.1", server.port(), "wrong", Millis(2000)); });
  EXPECT_NE(e.find("wrong job token"), std::string::npos) << e;
  EXPECT_EQ(server.rejected(), 1);
  TcpStore good("127.0.0.1", server.port(), "right", Millis(2000));
  good.set("k", "v");
  EXPECT_EQ(*good.try_get("k"), "v");
}

TEST(TcpStore, GarbageOversizedAndSilentClientsAreDroppedWithoutHarm) {
  TcpStoreLimits limits;
  limits.max_message = 1 << 20;
  limits.hello_timeout = Millis(300);
  TcpStoreServer server("127.0.0.1", 0, "tok", limits);
  TcpStore good("127.0.0.1", server.port(), "tok", Millis(2000));
  good.set("before", "1");

  std::string garbage(10000, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = char((i * 7919 + 13) & 0xFF);
  EXPECT_TRUE(server_closes_after(server.port(), garbage));
  EXPECT_TRUE(server_closes_after(server.port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  // authenticated, then a header announcing 1 GiB
  std::string big = hello("tok");
  big += char(1);
  uint32_t len = 1u << 30;
  big.append(reinterpret_cast<const char*>(&len), 4);
  EXPECT_TRUE(server_closes_after(server.port(), big));
  // authenticated, then an unknown operation and a malformed SET
  std::string unknown = hello("tok") + std::string(1, char(99)) + std::string(4, '\0');
  EXPECT_TRUE(server_closes_after(server.port(), unknown));
  std::string bad_set = hello("tok") + std::string(1, char(1));
  uint32_t four = 4, huge_key = 0xFFFFFFF0u;
  bad_set.append(reinterpret_cast<const char*>(&four), 4);
  bad_set.append(reinterpret_cast<const char*>(&huge_key), 4);
  EXPECT_TRUE(server_closes_after(server.port(), bad_set));
  // a token longer than any job's, and a client that never says hello
  EXPECT_TRUE(server_closes_after(server.port(), "DTS1" + std::string("\xff\xff\xff\x7f", 4)));
  EXPECT_TRUE(server_closes_after(server.port(), ""));
  EXPECT_GE(server.rejected(), 7);

  // A value over the limit from a real client is refused with a message naming the limit.
  const std::string e = error_of([&] {
    TcpStore c("127.0.0.1", server.port(), "tok", Millis(2000));
    c.set("big", std::string(2u << 20, 'x'));
  });
  EXPECT_NE(e.find("exceeds the store's limit"), std::string::npos) << e;

  // The server still serves the good client, which kept its connection throughout.
  EXPECT_EQ(*good.try_get("before"), "1");
  good.set("after", "2");
  EXPECT_EQ(good.add("count", 3), 3);
}

TEST(TcpStore, ConnectFailsWithALineNamingTheAddress) {
  Socket s = tcp_listen("127.0.0.1", 0);
  const int port = socket_port(s.fd());
  s.close();  // nobody listens there now
  const std::string e = error_of([&] { TcpStore c("127.0.0.1", port, "tok", Millis(300)); });
  EXPECT_NE(e.find("cannot connect to 127.0.0.1:" + std::to_string(port)), std::string::npos) << e;
  EXPECT_NE(error_of([] { parse_host_port("node1", "--rdzv-endpoint"); }).find("not HOST:PORT"), std::string::npos);
  EXPECT_EQ(parse_host_port("[::1]:29500", "x").first, "::1");
  EXPECT_EQ(parse_host_port("node01:29500", "x").second, 29500);
}

TEST(FileStore, SameSemanticsAndAtomicCountersAcrossProcesses) {
  const std::string dir = ::testing::TempDir() + "/filestore_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  FileStore a(dir, "tok"), b(dir, "tok");
  exercise(a, b);
  // 4 processes × 50 increments under the folder's lock
  std::vector<pid_t> kids;
  for (int k = 0; k < 4; ++k) {
    pid_t p = fork();
    if (p == 0) {
      FileStore s(dir, "tok");
      for (int i = 0; i < 50; ++i) s.add("counter", 1);
      _exit(0);
    }
    kids.push_back(p);
  }
  for (pid_t p : kids) waitpid(p, nullptr, 0);
  EXPECT_EQ(a.add("counter", 0), 200);
  const std::string e = error_of([&] { FileStore other(dir, "another-job"); });
  EXPECT_NE(e.find("belongs to another job"), std::string::npos) << e;
  std::filesystem::remove_all(dir);
}
