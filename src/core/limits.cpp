// Process limits and the faults they cause (see limits.hpp).
#include "core/limits.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>

namespace dtrain {

namespace {

constexpr int64_t kMiB = 1 << 20;
// What libraries map beyond dtrain's own plan (oneDNN's generated kernels and scratch, thread
// stacks they start): a run of the quickstart model crashed inside oneDNN with 67–87 MiB of room
// beyond its planned memory and 5 thread stacks, and never with 96 MiB or more.
constexpr int64_t kLibraryMargin = 48 * kMiB;

int64_t limit_of(int resource) {
  rlimit r{};
  if (::getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  return int64_t(r.rlim_cur);
}

// VmSize from /proc/self/statm (pages), read with system calls only: safe in a signal handler.
int64_t mapped_bytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[64];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  int64_t pages = 0;
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) pages = pages * 10 + (buf[i] - '0');
  return pages * int64_t(::sysconf(_SC_PAGESIZE));
}

std::string mib(int64_t bytes) { return std::to_string((bytes + kMiB / 2) / kMiB) + " MiB"; }

// ---- fault handlers: everything they touch is prepared before a fault ----

struct Mapping {
  std::atomic<bool> used{false};
  const char* begin = nullptr;
  size_t bytes = 0;
  char message[768] = {};
};
Mapping g_mappings[64];
std::mutex g_mappings_mu;  // registration only, never in the handler

int64_t g_as_limit = 0;
char g_oom_tail[512] = {};   // " MiB of address space in use, at the N MiB ...: FIX\n"

void write_all(const char* s, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= size_t(w);
  }
}
void write_str(const char* s) { write_all(s, std::strlen(s)); }
void write_int(int64_t v) {
  char digits[24];
  int k = 0;
  do {
    digits[k++] = char('0' + v % 10);
    v /= 10;
  } while (v > 0 && k < 23);
  char out[24];
  for (int i = 0; i < k; ++i) out[i] = digits[k - 1 - i];
  write_all(out, size_t(k));
}

void default_and_return(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);  // the faulting access runs again and takes the default action
}

void on_fault(int sig, siginfo_t* info, void*) {
  const char* at = static_cast<const char*>(info->si_addr);
  if (sig == SIGBUS) {
    for (Mapping& m : g_mappings)
      if (m.used.load(std::memory_order_acquire) && at >= m.begin && at < m.begin + m.bytes) {
        write_str(m.message);
        ::_exit(2);
      }
  }
  if (g_as_limit > 0) {
    // Within the margin of the limit: an allocation inside a library failed and it went on.
    const int64_t used = mapped_bytes();
    if (used + kLibraryMargin / 2 >= g_as_limit) {
      write_str(sig == SIGBUS ? "dtrain: error: a library crashed (SIGBUS) with "
                              : "dtrain: error: a library crashed (SIGSEGV) with ");
      write_int(used / kMiB);
      write_str(g_oom_tail);
      ::_exit(2);
    }
  }
  default_and_return(sig);
}

}  // namespace

int64_t address_space_limit() { return limit_of(RLIMIT_AS); }
int64_t address_space_in_use() { return mapped_bytes(); }

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return int(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
}

void require_thread_count(int64_t threads, const std::string& setting) {
  const int cpus = usable_cpus();
  require(threads >= 0 && threads <= cpus,
          setting + " = " + std::to_string(threads) + " is " + (threads < 0 ? "negative" : "more than the") +
              (threads < 0 ? "" : " " + std::to_string(cpus) + " CPUs this process may run on") +
              (setting.rfind("OMP_", 0) == 0 ? ": unset it, or give 1 to "
                                             : ": give 0 (one thread per CPU, or the share dtrun gives each rank) or 1 to ") +
              std::to_string(cpus));
}

int64_t thread_stack_bytes() {
  pthread_attr_t attr;
  size_t bytes = 8 * size_t(kMiB);
  if (::pthread_getattr_default_np(&attr) == 0) {
    ::pthread_attr_getstacksize(&attr, &bytes);
    ::pthread_attr_destroy(&attr);
  }
  return int64_t(bytes);
}

std::string memory_limit_note() {
  const int64_t limit = address_space_limit();
  if (limit == 0) return "";
  return " (this process may map " + mib(limit) + " of address space: ulimit -v; " + mib(address_space_in_use()) +
         " are in use)";
}

ResourceExhausted out_of_memory(const std::string& what, const std::string& fix) {
  const std::string note = memory_limit_note();
  return ResourceExhausted("out of memory for " + what + note + ": " + (note.empty() ? "" : "raise ulimit -v, or ") + fix);
}

ResourceExhausted thread_start_failed(const std::string& what, const std::string& fix) {
  const int64_t threads = limit_of(RLIMIT_NPROC);
  std::string limits;
  if (threads > 0) limits += "; this user may run " + std::to_string(threads) + " threads and processes: ulimit -u";
  const std::string memory = memory_limit_note();
  if (!memory.empty()) limits += ";" + memory.substr(1, memory.size() - 2);  // without the parentheses
  return ResourceExhausted("cannot start " + what + " (the system refused a new thread: " + std::strerror(EAGAIN) + limits +
               "): " + fix);
}

void require_address_space(int64_t bytes, const std::string& what, const std::string& fix) {
  const int64_t limit = address_space_limit();
  if (limit == 0) return;
  const int64_t in_use = address_space_in_use();
  if (in_use + bytes + kLibraryMargin <= limit) return;
  throw ResourceExhausted("out of memory for " + what + ": this process may map " + mib(limit) +
              " of address space (ulimit -v), " + mib(in_use) + " are in use and it needs about " +
              mib(bytes + kLibraryMargin) + " more (" + mib(kLibraryMargin) +
              " of it for what libraries such as oneDNN map on their own): raise ulimit -v, or " + fix);
}

void install_fault_handlers(const std::string& out_of_memory_fix) {
  static std::once_flag once;
  std::call_once(once, [&] {
    g_as_limit = address_space_limit();
    std::snprintf(g_oom_tail, sizeof g_oom_tail,
                  " MiB of address space in use, at the %lld MiB this process may map (ulimit -v): it ran out of "
                  "memory; raise ulimit -v, or %s\n",
                  (long long)(g_as_limit / kMiB), out_of_memory_fix.c_str());
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, nullptr);
    ::sigaction(SIGBUS, &sa, nullptr);
  });
}

int register_mapping(const void* addr, size_t bytes, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mappings_mu);
  for (int i = 0; i < int(std::size(g_mappings)); ++i) {
    Mapping& m = g_mappings[i];
    if (m.used.load(std::memory_order_relaxed)) continue;
    m.begin = static_cast<const char*>(addr);
    m.bytes = bytes;
    std::snprintf(m.message, sizeof m.message, "dtrain: error: %s\n", message.c_str());
    m.used.store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_mapping(int handle) {
  if (handle < 0) return;
  std::lock_guard<std::mutex> lock(g_mappings_mu);
  g_mappings[handle].used.store(false, std::memory_order_release);
}

}  // namespace dtrain
