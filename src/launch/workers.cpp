// WorkerGroup (see workers.hpp).
#include "launch/workers.hpp"

#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/descriptors.hpp"
#include "core/error.hpp"

namespace dtrain {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += size_t(w);
  }
}

// "" when `path` is a file this process may execute, else why not.
std::string file_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "not found";
  if (!S_ISREG(st.st_mode)) return "is not a file";
  if (::access(path.c_str(), X_OK) != 0) return "is not executable";
  return "";
}

}  // namespace

std::string program_problem(const std::string& program) {
  if (program.empty()) return "is empty";
  if (program.find('/') != std::string::npos) return file_problem(program);
  const char* env = std::getenv("PATH");
  const std::string path = env ? env : "/bin:/usr/bin";  // execvp's default
  for (size_t k = 0; k <= path.size();) {
    size_t c = path.find(':', k);
    if (c == std::string::npos) c = path.size();
    const std::string dir = c == k ? "." : path.substr(k, c - k);  // an empty entry is the current folder
    if (file_problem(dir + "/" + program).empty()) return "";
    k = c + 1;
  }
  return "not found (not a file on PATH)";
}

std::string WorkerExit::describe() const {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) + " (SIG" + (abbrev ? abbrev : "?") + ": " + strsignal(sig) + ")";
  }
  return "ended with status " + std::to_string(status);
}

bool WorkerExit::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

int StreamChoice::for_local_rank(int local_rank) const {
  if (per_local_rank.empty()) return all;
  const auto it = per_local_rank.find(local_rank);
  return it == per_local_rank.end() ? 0 : it->second;
}

bool StreamChoice::any() const {
  return all != 0 || std::any_of(per_local_rank.begin(), per_local_rank.end(), [](const auto& kv) { return kv.second; });
}

int WorkerGroup::descriptors_per_worker(const OutputPlan& plan) {
  return 2 + (plan.log_dir.empty() || !(plan.redirects.any() || plan.tee.any()) ? 0 : 2);
}

// Which streams go to files and which are forwarded, and the files themselves.
void WorkerGroup::open_logs(Worker& w) {
  const auto listed = [](const std::vector<int>& v, int x) { return v.empty() || std::find(v.begin(), v.end(), x) != v.end(); };
  const bool shown = listed(plan_.only_ranks, w.spec.rank) && listed(plan_.only_local_ranks, w.spec.local_rank);
  const int redirected = plan_.redirects.for_local_rank(w.spec.local_rank);
  const int teed = plan_.tee.for_local_rank(w.spec.local_rank);
  const std::string dir = plan_.log_dir + "/attempt_" + std::to_string(plan_.attempt) + "/rank_" + std::to_string(w.spec.rank);
  for (int s = 0; s < 2; ++s) {
    const int bit = 1 << s;  // 1 stdout, 2 stderr
    w.console[s] = shown && (!(redirected & bit) || (teed & bit));
    if (plan_.log_dir.empty() || !((redirected | teed) & bit)) continue;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string path = dir + (s == 0 ? "/stdout.log" : "/stderr.log");
    w.log[s] = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w.log[s] < 0) {
      throw_if_out_of_descriptors(errno, "cannot open the log file " + path);
      throw Error("cannot write the log file " + path + " (" + std::strerror(errno) + "): fix --log-dir");
    }
  }
}

WorkerGroup::WorkerGroup(const std::vector<std::string>& command, std::vector<WorkerSpec> specs, OutputPlan plan)
    : plan_(std::move(plan)), start_(now_s()) {
  workers_.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) workers_[i].spec = std::move(specs[i]);
  try {
    for (auto& w : workers_) open_logs(w);  // a log folder that cannot be written stops us before any start
    std::fflush(nullptr);
    for (auto& w : workers_) start(w, command);
  } catch (...) {
    release();  // the workers already started, and every descriptor
    throw;
  }
}

void WorkerGroup::start(Worker& w, const std::vector<std::string>& command) {
  const pid_t agent = ::getpid();
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {out[0], out[1]})
      if (fd >= 0) ::close(fd);
    throw_if_out_of_descriptors(e, "cannot create the pipes that carry the workers' output");
    throw Error(std::string("cannot create pipes for the workers: ") + std::strerror(e));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    throw Error(std::string("cannot start a worker (fork failed: ") + std::strerror(e) +
                "): too many processes for this user (ulimit -u) or too little memory");
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group: stopping it reaches its children too
    // Die with the agent, even one killed with SIGKILL (see workers.hpp). If the agent died
    // before prctl, this process already has another parent.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != agent) _exit(128 + SIGKILL);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    for (const auto& [k, v] : w.spec.env) ::setenv(k.c_str(), v.c_str(), 1);
    if (!w.spec.cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : w.spec.cpus) CPU_SET(c, &set);
      if (::sched_setaffinity(0, sizeof set, &set) != 0) {
        write_all(2, std::string("dtrun: cannot bind a worker to its CPUs: ") + std::strerror(errno) + "\n");
        _exit(127);
      }
    }
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::string msg = "dtrun: cannot run " + command[0] + ": " + std::strerror(errno) + "\n";
    write_all(2, msg);
    _exit(127);
  }
  ::setpgid(pid, pid);
  ::close(out[1]);
  ::close(err[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  w.pid = pid;
  w.out = out[0];
  w.err = err[0];
}

WorkerGroup::~WorkerGroup() { release(); }

void WorkerGroup::release() {
  for (auto& w : workers_) {
    if (w.pid > 0 && !w.exited) {
      ::kill(-w.pid, SIGKILL);
      ::waitpid(w.pid, nullptr, 0);
      w.exited = true;
    }
    for (int* fd : {&w.out, &w.err, &w.log[0], &w.log[1]}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }
}

void WorkerGroup::emit(Worker& w, const std::string& line, bool is_err) {
  w.last.emplace_back(line, plan_.tag && w.console[is_err]);
  if (w.last.size() > 20) w.last.pop_front();
  if (w.log[is_err] >= 0) write_all(w.log[is_err], line + "\n");
  if (!w.console[is_err]) return;
  write_all(is_err ? 2 : 1, (plan_.tag ? "[" + std::to_string(w.spec.rank) + "]: " : std::string()) + line + "\n");
}

void WorkerGroup::forward(Worker& w, int& fd, std::string& buf, bool flush_all) {
  char chunk[65536];
  const bool is_err = &fd == &w.err;
  bool eof = false;
  for (;;) {
    ssize_t r = ::read(fd, chunk, sizeof chunk);
    if (r > 0) {
      buf.append(chunk, size_t(r));
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    eof = r == 0;  // the worker closed it (exited): stop polling this pipe
    break;
  }
  if (eof) {
    ::close(fd);
    fd = -1;
    flush_all = true;
  }
  size_t nl;
  while ((nl = buf.find('\n')) != std::string::npos) {
    std::string line = buf.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    emit(w, line, is_err);
    buf.erase(0, nl + 1);
  }
  if (flush_all && !buf.empty()) {
    emit(w, buf, is_err);
    buf.clear();
  }
}

std::vector<WorkerExit> WorkerGroup::poll(int ms) {
  std::vector<pollfd> fds;
  for (auto& w : workers_) {
    if (w.out >= 0) fds.push_back({w.out, POLLIN, 0});
    if (w.err >= 0) fds.push_back({w.err, POLLIN, 0});
  }
  if (!fds.empty()) {
    ::poll(fds.data(), fds.size(), ms);
  } else if (ms > 0) {
    ::usleep(useconds_t(ms) * 1000);
  }
  std::vector<WorkerExit> exits;
  for (auto& w : workers_) {
    if (w.out >= 0) forward(w, w.out, w.out_buf, false);
    if (w.err >= 0) forward(w, w.err, w.err_buf, false);
    if (w.exited) continue;
    int status = 0;
    if (::waitpid(w.pid, &status, WNOHANG) == w.pid) {
      w.exited = true;
      // drain what it wrote last
      if (w.out >= 0) forward(w, w.out, w.out_buf, true);
      if (w.err >= 0) forward(w, w.err, w.err_buf, true);
      exits.push_back({w.spec.rank, w.spec.local_rank, w.pid, status, now_s() - start_});
    }
  }
  return exits;
}

bool WorkerGroup::all_exited() const {
  return std::all_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.exited; });
}

size_t WorkerGroup::running() const {
  return size_t(std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return !w.exited; }));
}

void WorkerGroup::send(int sig) {
  for (auto& w : workers_)
    if (!w.exited) ::kill(-w.pid, sig);
}

void WorkerGroup::stop(int grace_s) {
  send(SIGTERM);
  const double until = now_s() + grace_s;
  while (!all_exited() && now_s() < until) poll(50);
  for (auto& w : workers_)
    if (!w.exited) ::kill(-w.pid, SIGKILL);
  while (!all_exited()) poll(50);
}

std::string WorkerGroup::tail(int rank) const {
  std::string s;
  for (const auto& w : workers_)
    if (w.spec.rank == rank)
      for (const auto& [line, shown] : w.last)
        if (!shown) s += "    " + line + "\n";
  return s;
}

}  // namespace dtrain
