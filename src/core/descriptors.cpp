// Descriptor-limit messages and checks (see descriptors.hpp).
#include "core/descriptors.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace dtrain {

namespace {

rlimit nofile_limit() {
  rlimit rl{RLIM_INFINITY, RLIM_INFINITY};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  return rl;
}

// How to raise the limit: 65536, or the hard limit when that is lower and still above the soft one.
std::string limit_fix(const rlimit& rl) {
  rlim_t want = 65536;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max > rl.rlim_cur && rl.rlim_max < want) want = rl.rlim_max;
  return "raise the limit (ulimit -n " + std::to_string(want) + ", or LimitNOFILE in the service/job)";
}

std::string files(rlim_t n) { return std::to_string(n) + (n == 1 ? " file" : " files"); }

// Descriptors this process has open below `limit` (entries of /proc/self/fd; one above the limit,
// inherited from a parent with a higher one, takes no free slot); -1 when they cannot be listed.
int open_descriptors(rlim_t limit) {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  const int own = ::dirfd(d);
  int n = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const long fd = std::strtol(e->d_name, nullptr, 10);
    if (fd != own && rlim_t(fd) < limit) ++n;
  }
  ::closedir(d);
  return n;
}

}  // namespace

bool out_of_descriptors(int err) { return err == EMFILE || err == ENFILE; }

std::string descriptor_limit_problem(int err) {
  if (err == ENFILE) {
    return "this machine has no file descriptors left for any process (ENFILE: the system-wide limit fs.file-max "
           "is reached): close programs that hold many files, or raise it (sysctl fs.file-max)";
  }
  const rlimit rl = nofile_limit();
  if (rl.rlim_cur == RLIM_INFINITY) return "this process has used all the files it may open (ulimit -n): " + limit_fix(rl);
  return "this process may open only " + files(rl.rlim_cur) + " (ulimit -n) and has used them all: " + limit_fix(rl);
}

void throw_if_out_of_descriptors(int err, const std::string& doing) {
  if (out_of_descriptors(err)) throw ResourceExhausted(doing + ": " + descriptor_limit_problem(err));
}

int descriptor_shortage() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return 0;
  }
  return out_of_descriptors(errno) ? errno : 0;
}

void throw_if_library_ran_out_of_descriptors(const std::string& library_message, const std::string& doing) {
  const int err = library_message.find(std::strerror(ENFILE)) != std::string::npos   ? ENFILE
                  : library_message.find(std::strerror(EMFILE)) != std::string::npos ? EMFILE
                                                                                     : descriptor_shortage();
  throw_if_out_of_descriptors(err, doing);
}

void require_free_descriptors(int needed, const std::string& doing) {
  if (const int err = descriptor_shortage()) throw_if_out_of_descriptors(err, doing);
  const rlimit rl = nofile_limit();
  if (rl.rlim_cur == RLIM_INFINITY) return;
  const int open = open_descriptors(rl.rlim_cur);
  if (open < 0 || rlim_t(open) + rlim_t(needed) <= rl.rlim_cur) return;
  throw ResourceExhausted(doing + ": it needs " + std::to_string(needed) + " more file descriptor" + (needed == 1 ? "" : "s") +
              ", but this process may open only " + files(rl.rlim_cur) + " (ulimit -n) and has " + std::to_string(open) +
              " open: " + limit_fix(rl));
}

}  // namespace dtrain
