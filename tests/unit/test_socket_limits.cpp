// Out of file descriptors (ulimit -n), in forked children: every place that opens a socket or a
// file to communicate fails at once with one line naming the limit, not retrying or blaming the network.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <vector>

#include "comm/env.hpp"
#include "comm/file_store.hpp"
#include "comm/gloo_backend.hpp"
#include "comm/socket.hpp"
#include "comm/tcp_store.hpp"
#include "comm/world.hpp"
#include "core/descriptors.hpp"

using namespace dtrain;

namespace {

constexpr int kLimit = 64;  // the child's `ulimit -n`

// Lowers this process's limit to kLimit and opens /dev/null until no descriptor is left, then
// closes `leave_free` of them.
void use_up_descriptors(int leave_free) {
  const rlimit rl{rlim_t(kLimit), rlim_t(kLimit)};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(90);
  std::vector<int> held;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) held.push_back(fd);
  if (errno != EMFILE) _exit(91);
  for (int i = 0; i < leave_free && !held.empty(); ++i) {
    ::close(held.back());
    held.pop_back();
  }
}

struct Outcome {
  std::string error;  // the message of what fn threw ("" when nothing)
  double seconds = 0;
};

// Runs fn in a forked child and reports what it threw and how long it took.
Outcome in_child(const std::function<void()>& fn) {
  int p[2];
  if (pipe(p) != 0) std::abort();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    const auto t0 = std::chrono::steady_clock::now();
    std::string msg;
    try {
      fn();
    } catch (const std::exception& e) {
      msg = e.what();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (void)!write(p[1], &s, sizeof s);
    (void)!write(p[1], msg.data(), msg.size());
    _exit(0);
  }
  close(p[1]);
  Outcome o;
  std::string got;
  char buf[4096];
  for (ssize_t r; (r = read(p[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(r));
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  if (got.size() >= sizeof(double)) {
    std::memcpy(&o.seconds, got.data(), sizeof(double));
    o.error = got.substr(sizeof(double));
  }
  return o;
}

// The message names the limit, its value and how to raise it, and says what was being done.
void expect_limit_line(const Outcome& o, const std::string& doing) {
  EXPECT_NE(o.error.find(doing), std::string::npos) << o.error;
  EXPECT_NE(o.error.find("may open only " + std::to_string(kLimit) + " files (ulimit -n)"), std::string::npos)
      << o.error;
  EXPECT_NE(o.error.find("raise the limit (ulimit -n 65536, or LimitNOFILE"), std::string::npos) << o.error;
  EXPECT_EQ(o.error.find('\n'), std::string::npos) << "one line: " << o.error;
  EXPECT_LT(o.seconds, 5.0) << "it should fail at once, not wait for its timeout: " << o.error;
}

}  // namespace

TEST(DescriptorLimit, TheMessageReadsTheLimit) {
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  const std::string m = descriptor_limit_problem(EMFILE);
  if (rl.rlim_cur != RLIM_INFINITY) {
    EXPECT_NE(m.find("may open only " + std::to_string(rl.rlim_cur) + " files (ulimit -n)"), std::string::npos) << m;
  }
  EXPECT_NE(descriptor_limit_problem(ENFILE).find("fs.file-max"), std::string::npos);
  EXPECT_TRUE(out_of_descriptors(EMFILE) && out_of_descriptors(ENFILE) && !out_of_descriptors(ECONNREFUSED));
  EXPECT_EQ(descriptor_shortage(), 0);  // this process has descriptors to spare
}

TEST(DescriptorLimit, ConnectingFailsAtOnce) {
  TcpStoreServer server("127.0.0.1", 0, "tok");  // a store that would answer
  const std::string where = "127.0.0.1:" + std::to_string(server.port());
  expect_limit_line(in_child([&] {
                      use_up_descriptors(0);
                      tcp_connect("127.0.0.1", server.port(), Millis(20000));
                    }),
                    "cannot open a socket to connect to " + where);
  expect_limit_line(in_child([&] {
                      use_up_descriptors(0);
                      TcpStore c("127.0.0.1", server.port(), "tok", Millis(20000));
                    }),
                    "cannot open a socket to connect to " + where);
  // a name needs the resolver's files first
  expect_limit_line(in_child([&] {
                      use_up_descriptors(0);
                      tcp_connect("localhost", server.port(), Millis(20000));
                    }),
                    "localhost");
}

TEST(DescriptorLimit, ListeningAndCheckingAddressesFailAtOnce) {
  expect_limit_line(in_child([] {
                      use_up_descriptors(0);
                      tcp_listen("127.0.0.1", 0);
                    }),
                    "cannot open a socket to listen on 127.0.0.1:0");
  // the listener opens, its wake-up pipe does not
  expect_limit_line(in_child([] {
                      use_up_descriptors(1);
                      TcpStoreServer s("127.0.0.1", 0, "tok");
                    }),
                    "cannot start the store server");
  // not "this is not an address of this machine" (which would listen on every address)
  expect_limit_line(in_child([] {
                      use_up_descriptors(0);
                      listen_address("127.0.0.1", true, "MASTER_ADDR");
                    }),
                    "cannot check whether '127.0.0.1' is an address of this machine");
  expect_limit_line(in_child([] {
                      use_up_descriptors(0);
                      listen_address("localhost", true, "MASTER_ADDR");
                    }),
                    "localhost");
  // not "set DTRAIN_SOCKET_IFNAME"
  expect_limit_line(in_child([] {
                      use_up_descriptors(0);
                      address_for_peers("localhost", false);
                    }),
                    "localhost");
}

TEST(DescriptorLimit, FileStoreFailsInsteadOfSeeingNoKey) {
  const std::string dir = ::testing::TempDir() + "/fdlimit_store_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  FileStore store(dir, "tok");
  store.set("k", "v");
  expect_limit_line(in_child([&] {
                      use_up_descriptors(0);
                      store.try_get("k");  // there, but cannot be opened
                    }),
                    "cannot read the file store's");
  expect_limit_line(in_child([&] {
                      use_up_descriptors(0);
                      FileStore again(dir, "tok");
                    }),
                    "cannot open the file store's lock file");
  expect_limit_line(in_child([&] {
                      use_up_descriptors(0);
                      store.set("k2", "v");
                    }),
                    "cannot write");
  std::filesystem::remove_all(dir);
}

TEST(DescriptorLimit, GlooNamesTheLimitNotTheInterface) {
  for (int free : {0, 1}) {
    const Outcome o = in_child([&] {
      use_up_descriptors(free);
      make_gloo_device("127.0.0.1", "");
    });
    expect_limit_line(o, "cannot open the Gloo transport");
    EXPECT_EQ(o.error.find("DTRAIN_SOCKET_IFNAME"), std::string::npos) << o.error;
    if (free == 1) {  // checked before Gloo opens its two (the count leaves out descriptors above the limit)
      EXPECT_NE(o.error.find("it needs 2 more file descriptors, but this process may open only 64 files (ulimit -n) "
                             "and has 63 open"),
                std::string::npos)
          << o.error;
    }
  }
  // connecting 4 ranks takes 3 sockets; 2 are left
  const std::string dir = ::testing::TempDir() + "/fdlimit_gloo_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  FileStore store(dir, "tok");
  const Outcome o = in_child([&] {
    auto device = make_gloo_device("127.0.0.1", "");
    use_up_descriptors(2);
    connect_gloo(store, 0, 4, device, Millis(20000), "world");
  });
  expect_limit_line(o, "process group 'world' cannot connect its 4 ranks: it needs 3 more file descriptors");
  std::filesystem::remove_all(dir);
}

// The operator's case: a rank with room for its store connections but not for Gloo's.
TEST(DescriptorLimit, ARankThatCannotOpenItsTransportSaysSo) {
  TcpStoreServer server("127.0.0.1", 0, "tok");
  DistEnv env;
  env.rank = 1;
  env.world_size = 2;
  env.local_rank = 1;
  env.local_world_size = 2;
  env.agent_store = true;
  env.master_port = server.port();
  env.token = "tok";
  for (int free : {0, 1, 2, 3}) {
    const Outcome o = in_child([&] {
      use_up_descriptors(free);
      World w(env, Millis(20000));
    });
    expect_limit_line(o, "cannot ");
    EXPECT_EQ(o.error.find("DTRAIN_SOCKET_IFNAME"), std::string::npos) << o.error;
  }
}
