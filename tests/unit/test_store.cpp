// The TCP and file stores: set/get/add/wait semantics, timeouts that name missing keys, job
// tokens, and a server that survives garbage, oversized, unauthenticated and too many clients.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
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

// A store server in a child process that may hold at most `max_fds` descriptors (the test
// process keeps its own limit); killed when this goes out of scope.
struct ServerProcess {
  pid_t pid = -1;
  int port = 0;
  ServerProcess(int max_fds, TcpStoreLimits limits) {
    int p[2];
    if (pipe(p) != 0) std::abort();
    std::fflush(nullptr);
    pid = fork();
    if (pid == 0) {
      close(p[0]);
      try {
        const rlimit rl{rlim_t(max_fds), rlim_t(max_fds)};
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(1);
        TcpStoreServer server("127.0.0.1", 0, "tok", limits);
        const int bound = server.port();
        (void)!write(p[1], &bound, sizeof bound);
        close(p[1]);
        for (;;) pause();
      } catch (...) {
      }
      _exit(1);
    }
    close(p[1]);
    if (read(p[0], &port, sizeof port) != ssize_t(sizeof port)) port = 0;
    close(p[0]);
  }
  ~ServerProcess() {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  // CPU time (user + system) the process has used so far, from /proc/PID/stat.
  double cpu_seconds() const {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    const std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 1));  // the name may hold spaces
    std::vector<std::string> v{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
    if (v.size() < 13) return -1;
    return double(std::stoll(v[11]) + std::stoll(v[12])) / double(sysconf(_SC_CLK_TCK));  // utime, stime
  }
  // CPU time used over two seconds of wall time.
  double cpu_over_two_seconds() const {
    const double before = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    return cpu_seconds() - before;
  }
};

// Starts a connection to 127.0.0.1:port without waiting for it to be accepted.
Socket connect_without_waiting(int port) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  (void)!::connect(s.fd(), reinterpret_cast<const sockaddr*>(&a), sizeof a);
  return s;
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

// `ulimit -n` too low for the connections: pending ones keep the listener readable while accept
// fails with EMFILE. The server sheds idle unauthenticated connections for real clients and
// never busy-loops.
// The server refuses an oversized message after its header, while the client is still sending: it
// reads on (and discards) until the client is done, so the client always gets the reason, never a
// reset connection. Values far past what the sockets buffer make the client outrun the refusal.
TEST(TcpStore, AClientRefusedMidMessageStillReadsWhy) {
  TcpStoreLimits limits;
  limits.max_message = 1 << 20;
  TcpStoreServer server("127.0.0.1", 0, "tok", limits);
  for (size_t mib : {2, 16, 64}) {
    const std::string e = error_of([&] {
      TcpStore c("127.0.0.1", server.port(), "tok", Millis(2000));
      c.set("big", std::string(mib << 20, 'x'));
    });
    EXPECT_NE(e.find("exceeds the store's limit of 1048576"), std::string::npos) << mib << " MiB: " << e;
  }
  TcpStore after("127.0.0.1", server.port(), "tok", Millis(2000));
  after.set("k", "v");
  EXPECT_EQ(*after.try_get("k"), "v");
}

// Timeouts past what the clock holds (parallel.timeout_s = 1e12) or below zero are cut, on the
// client and on the server, never sent malformed nor turned into a deadline in the past.
TEST(TcpStore, HugeAndNegativeWaitTimeoutsAreCutNotSentMalformed) {
  TcpStoreServer server("127.0.0.1", 0, "tok");
  const Millis huge = Millis::max(), half = Millis(std::numeric_limits<int64_t>::max() / 2);
  TcpStore c("127.0.0.1", server.port(), "tok", Millis(2000), huge);  // its operations' timeout too
  TcpStore other("127.0.0.1", server.port(), "tok", Millis(2000), half);
  c.set("here", "1");
  EXPECT_EQ(*other.try_get("here"), "1");
  EXPECT_TRUE(c.wait({"here"}, huge).empty());
  EXPECT_TRUE(c.wait({"here"}, half).empty());
  EXPECT_EQ(c.wait({"absent"}, Millis(-5)), std::vector<std::string>{"absent"});
  std::thread later([&] {
    std::this_thread::sleep_for(Millis(100));
    other.set("late", "v");
  });
  EXPECT_TRUE(c.wait({"late"}, huge).empty());  // parked until the key comes
  later.join();
  // The server, sent a wait longer than its clock holds by another client, parks it too.
  Socket raw = tcp_connect("127.0.0.1", server.port(), Millis(2000));
  std::string req = hello("tok");
  std::string payload;
  const int64_t ms = std::numeric_limits<int64_t>::max();
  const uint32_t one = 1, key_len = 5;
  payload.append(reinterpret_cast<const char*>(&ms), 8);
  payload.append(reinterpret_cast<const char*>(&one), 4);
  payload.append(reinterpret_cast<const char*>(&key_len), 4);
  payload += "later";
  const uint32_t n = uint32_t(payload.size());
  req += char(4);  // WAIT
  req.append(reinterpret_cast<const char*>(&n), 4);
  req += payload;
  ASSERT_TRUE(send_all(raw.fd(), req.data(), req.size(), deadline_in(Millis(2000))));
  char hello_reply[5];
  ASSERT_TRUE(recv_all(raw.fd(), hello_reply, 5, deadline_in(Millis(2000))));
  std::this_thread::sleep_for(Millis(50));  // (lets an overflowed deadline show itself as "missing" at once)
  other.set("later", "v");
  char reply[5];
  ASSERT_TRUE(recv_all(raw.fd(), reply, 5, deadline_in(Millis(5000))));
  EXPECT_EQ(reply[0], 0) << "the wait should end because the key came (0), not time out (1) or be refused (2)";
  EXPECT_EQ(server.rejected(), 0);

  const std::string dir = ::testing::TempDir() + "/filestore_wait_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  FileStore f(dir, "tok");
  f.set("here", "1");
  EXPECT_TRUE(f.wait({"here"}, huge).empty());
  EXPECT_EQ(f.wait({"absent"}, Millis(-5)), std::vector<std::string>{"absent"});
  std::filesystem::remove_all(dir);
}

TEST(TcpStore, AnIdleFloodPastTheDescriptorLimitNeitherLocksOutClientsNorSpins) {
  TcpStoreLimits limits;
  limits.hello_timeout = Millis(120000);  // the flood is not dropped for silence during the test
  ServerProcess server(64, limits);
  ASSERT_GT(server.port, 0);
  std::vector<Socket> flood;
  for (int i = 0; i < 200; ++i) flood.push_back(connect_without_waiting(server.port));
  std::this_thread::sleep_for(Millis(500));
  const double cpu = server.cpu_over_two_seconds();
  EXPECT_GE(cpu, 0.0);
  EXPECT_LT(cpu, 0.25) << "the server spun on its listener (an idle one uses next to none)";
  const std::string e = error_of([&] {
    TcpStore real("127.0.0.1", server.port, "tok", Millis(20000));
    real.set("k", "v");
    EXPECT_EQ(*real.try_get("k"), "v");
  });
  EXPECT_EQ(e, "");
}

TEST(TcpStore, AuthenticatedClientsPastTheDescriptorLimitMakeTheServerWaitNotSpin) {
  ServerProcess server(32, {});
  ASSERT_GT(server.port, 0);
  std::vector<std::unique_ptr<TcpStore>> clients;
  std::string refused;
  while (clients.size() < 64 && refused.empty()) {
    refused =
        error_of([&] { clients.push_back(std::make_unique<TcpStore>("127.0.0.1", server.port, "tok", Millis(1500))); });
  }
  ASSERT_NE(refused, "") << "the server never ran out of descriptors";
  Socket pending = connect_without_waiting(server.port);  // keeps the listener readable
  const double cpu = server.cpu_over_two_seconds();
  EXPECT_GE(cpu, 0.0);
  EXPECT_LT(cpu, 0.25) << "the server spun on its listener (an idle one uses next to none)";
  // A client that leaves frees a descriptor: the server accepts again and still serves.
  clients.pop_back();
  TcpStore late("127.0.0.1", server.port, "tok", Millis(20000));
  late.set("k", "v");
  EXPECT_EQ(*clients[0]->try_get("k"), "v");
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
  // a port to connect to is 1..65535; 0 ("any free port") only for an address to listen on
  const std::string zero = error_of([] { parse_host_port("node1:0", "--rdzv-endpoint"); });
  EXPECT_NE(zero.find("--rdzv-endpoint 'node1:0': the port must be from 1 to 65535"), std::string::npos) << zero;
  EXPECT_NE(zero.find("--standalone"), std::string::npos) << zero;
  EXPECT_EQ(parse_host_port("node1:0", "x", /*any_port=*/true).second, 0);
  for (const char* bad : {"node1:65536", "node1:4294967297", "node1:99999999999999999999"}) {
    const std::string e = error_of([&] { parse_host_port(bad, "MASTER"); });
    EXPECT_NE(e.find("must be from 1 to 65535"), std::string::npos) << bad << ": " << e;
  }
  EXPECT_NE(error_of([] { parse_host_port("node1:+80", "x"); }).find("not HOST:PORT"), std::string::npos);
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
