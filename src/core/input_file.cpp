// Checked opening and bounded whole-file reads of the files a user names (see input_file.hpp).
#include "core/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/descriptors.hpp"
#include "core/error.hpp"

namespace dtrain {

namespace {

std::string kind_of_mode(mode_t m) {
  if (S_ISREG(m)) return "";
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a named pipe (FIFO)";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// "config x.toml" or, for a plain file, "x.toml".
std::string subject(const std::string& path, std::string_view what) {
  return what == "file" ? path : std::string(what) + " " + path;
}

[[noreturn]] void refuse(const std::string& path, std::string_view what, const std::string& kind) {
  throw Error("cannot read " + subject(path, what) + ": it is " + kind +
              ", not a regular file; point it at a regular file");
}

std::string human_size(size_t n) {
  return n >= (size_t(1) << 20) ? std::to_string(n >> 20) + " MiB" : std::to_string(n) + " bytes";
}

}  // namespace

std::string non_regular_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return kind_of_mode(st.st_mode);
}

void require_regular_file(const std::string& path, std::string_view what) {
  if (const std::string kind = non_regular_kind(path); !kind.empty()) refuse(path, what, kind);
}

int open_regular_file(const std::string& path, std::string_view what) {
  const std::string doing = "cannot read " + subject(path, what);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO opens at once, unread
  if (fd < 0) {
    const int err = errno;
    throw_if_out_of_descriptors(err, doing);
    if (err == ENOENT) throw Error(doing + ": no such file; check the path");
    if (err == EACCES || err == EPERM) throw Error(doing + ": permission denied; make the file readable");
    if (err == ELOOP) throw Error(doing + ": its symbolic links loop; fix the link");
    throw Error(doing + ": " + std::strerror(err) + "; check the path");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string kind = kind_of_mode(st.st_mode);
    ::close(fd);
    refuse(path, what, kind.empty() ? "unreadable" : kind);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::string read_file(const std::string& path, size_t max_bytes, std::string_view what) {
  const int fd = open_regular_file(path, what);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  ::fstat(fd, &st);
  auto too_big = [&](size_t n) {
    return Error("cannot read " + subject(path, what) + ": it holds " + human_size(n) +
                 ", more than a " + std::string(what) + " can (" + human_size(max_bytes) +
                 "); is it the right file?");
  };
  if (size_t(st.st_size) > max_bytes) throw too_big(size_t(st.st_size));
  std::string out(size_t(st.st_size), '\0');
  size_t have = 0;
  const size_t room = max_bytes == SIZE_MAX ? SIZE_MAX : max_bytes + 1;  // one byte more tells "too big"
  while (true) {  // a file that grows while read is read to its end, still within the bound
    if (have == out.size()) {
      if (have > max_bytes) throw too_big(have);
      out.resize(std::min(room, std::max<size_t>(out.size() * 2, 1 << 16)));
    }
    const ssize_t r = ::read(fd, out.data() + have, std::min<size_t>(out.size() - have, size_t(1) << 30));
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot read " + subject(path, what) + ": " + std::strerror(errno) +
                  "; the disk or file system reported an I/O error, check it");
    }
    have += size_t(r);
  }
  out.resize(have);
  return out;
}

}  // namespace dtrain
