// Test helper: runs a function as N ranks in forked processes around a store the parent hosts
// (as dtrun does), and collects each rank's exit status and error message.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "comm/env.hpp"
#include "comm/tcp_store.hpp"
#include "comm/world.hpp"

namespace dist_test {

// A failed check inside a rank: the rank prints the message and exits 1.
#define RANK_CHECK(cond, msg)                                                                  \
  do {                                                                                         \
    if (!(cond)) throw std::runtime_error(std::string("check failed: ") + #cond + ": " + (msg)); \
  } while (0)

struct RankResult {
  int exit_code = -1;
  std::string error;  // what the rank printed before failing (its exception message)
};

inline dtrain::DistEnv env_for(int rank, int n, int port, const std::string& token) {
  dtrain::DistEnv e;
  e.rank = rank;
  e.world_size = n;
  e.local_rank = rank;
  e.local_world_size = n;
  e.agent_store = true;
  e.master_port = port;
  e.token = token;
  e.launcher = "test";
  return e;
}

// Runs fn(rank, port) in n child processes; the parent hosts the store on a free port.
inline std::vector<RankResult> run_ranks(int n, const std::function<void(int rank, int port)>& fn,
                                         const std::string& token = "test-token") {
  dtrain::TcpStoreServer server("127.0.0.1", 0, token);
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  std::fflush(nullptr);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) std::abort();
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      int code = 0;
      std::string msg;
      try {
        fn(r, server.port());
      } catch (const std::exception& e) {
        msg = e.what();
        code = 1;
      }
      if (!msg.empty()) (void)!write(p[1], msg.data(), msg.size());
      close(p[1]);
      std::fflush(nullptr);
      _exit(code);
    }
    close(p[1]);
    pids.push_back(pid);
    pipes.push_back(p[0]);
  }
  std::vector<RankResult> out{size_t(n), RankResult{}};
  for (int r = 0; r < n; ++r) {
    char buf[4096];
    ssize_t k;
    while ((k = read(pipes[size_t(r)], buf, sizeof buf)) > 0) out[size_t(r)].error.append(buf, size_t(k));
    close(pipes[size_t(r)]);
    int status = 0;
    waitpid(pids[size_t(r)], &status, 0);
    out[size_t(r)].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return out;
}

// All ranks exited 0; otherwise a message listing each failure.
inline std::string failures(const std::vector<RankResult>& rs) {
  std::string s;
  for (size_t r = 0; r < rs.size(); ++r)
    if (rs[r].exit_code != 0) s += "rank " + std::to_string(r) + " exit " + std::to_string(rs[r].exit_code) + ": " + rs[r].error + "\n";
  return s;
}

}  // namespace dist_test
