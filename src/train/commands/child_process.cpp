// A program run to its end with its output in a log file, and the programs beside dtrain (see
// child_process.hpp).
#include "train/commands/child_process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

extern char** environ;

namespace dtrain {

ChildEnd run_logged_to_end(const std::vector<std::string>& argv, const std::string& log_path, const std::string& fix,
                           bool append) {
  DT_ASSERT(!argv.empty());
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0644);
  if (log < 0) {
    const int err = errno;
    throw Error("cannot write " + log_path + ": " + std::strerror(err) + "; choose a writable --out");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log, 1);
  posix_spawn_file_actions_adddup2(&actions, log, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(log);
  if (rc != 0) throw Error("cannot start " + argv[0] + ": " + std::strerror(rc) + "; " + fix);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error("cannot wait for " + argv[0] + ": " + std::strerror(errno));
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    return {code, code == 0 ? "" : "exit status " + std::to_string(code)};
  }
  if (WIFSIGNALED(status)) return {128 + WTERMSIG(status), "killed by signal " + std::to_string(WTERMSIG(status))};
  return {255, "ended with wait status " + std::to_string(status)};
}

std::string run_logged(const std::vector<std::string>& argv, const std::string& log_path, const std::string& fix) {
  return run_logged_to_end(argv, log_path, fix).how;
}

std::string program_beside_self(const std::string& name, const std::string& command) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  require(!ec, "cannot find the running dtrain (/proc/self/exe: " + ec.message() + "): run " + command +
                   " on Linux with /proc mounted");
  return (self.parent_path() / name).string();
}

}  // namespace dtrain
