// Atomic file and directory replacement (see atomic_file.hpp). POSIX only.
#include "core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/descriptors.hpp"
#include "core/error.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

std::string parent_of(const std::string& path) {
  fs::path p = fs::path(strip_slashes(path)).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

// "<strerror>; <what to do>" for an errno from a write/create/rename.
std::string write_problem(int err, const std::string& path) {
  std::string msg = std::strerror(err);
  switch (err) {
    case ENOENT: return msg + "; create the directory " + parent_of(path) + " first";
    case EACCES:
    case EPERM:
    case EROFS: return msg + "; make " + parent_of(path) + " writable or choose another path";
    case ENOSPC:
    case EDQUOT: return msg + "; free disk space or choose another path";
    case EISDIR: return msg + "; " + path + " is a directory, choose a file path";
    case ENOTDIR: return msg + "; a parent of " + path + " is not a directory, fix the path";
    default: return msg + "; check the path and the disk";
  }
}

// 0 on success, else errno.
int write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    size_t chunk = std::min<size_t>(n, size_t(1) << 30);
    ssize_t w = ::write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    p += w;
    n -= size_t(w);
  }
  return 0;
}

// Removes a file or directory tree, ignoring errors (used for cleanup only).
void remove_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

}  // namespace

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the data itself was already synced
  ::fsync(fd);         // some filesystems reject fsync on directories (EINVAL); that is fine
  ::close(fd);
}

namespace {
std::atomic<uint64_t> g_temp_counter{0};
constexpr size_t kBufferBytes = size_t(1) << 16;
}  // namespace

AtomicFile::AtomicFile(const std::string& path)
    : path_(path), tmp_(path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(g_temp_counter++)) {
  // The rename that commits replaces whatever has the name: only ever a regular file (never a
  // device such as /dev/full, a folder, a pipe or a symbolic link, which the user meant otherwise).
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)   ? "a folder"
                       : S_ISLNK(st.st_mode) ? "a symbolic link"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                       : S_ISFIFO(st.st_mode) ? "a pipe"
                                              : "not a regular file";
    throw Error("cannot write " + path_ + ": it is " + kind + ", which dtrain does not replace: choose another path "
                "(a new file, or a regular file to overwrite)");
  }
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    int err = errno;
    throw_if_out_of_descriptors(err, "cannot write " + path_);
    throw Error("cannot write " + path_ + ": creating " + tmp_ + " failed: " + write_problem(err, path_));
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::fail(const char* step, int err) {
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  throw Error("cannot write " + path_ + " (" + step + "): " + write_problem(err, path_));
}

void AtomicFile::flush_buffer() {
  if (buffer_.empty()) return;
  if (int err = write_all(fd_, buffer_.data(), buffer_.size())) fail("write", err);
  buffer_.clear();
}

void AtomicFile::write(const void* data, size_t n) {
  DT_ASSERT(fd_ >= 0);
  if (buffer_.size() + n <= kBufferBytes) {
    buffer_.append(static_cast<const char*>(data), n);
    return;
  }
  flush_buffer();
  if (int err = write_all(fd_, data, n)) fail("write", err);
}

void AtomicFile::commit() {
  DT_ASSERT(fd_ >= 0);
  flush_buffer();
  if (::fsync(fd_) != 0) fail("fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    throw Error("cannot write " + path_ + " (close): " + write_problem(err, path_));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    throw Error("cannot write " + path_ + " (rename from " + tmp_ + "): " + write_problem(err, path_));
  }
  fsync_dir(parent_of(path_));
}

void write_file_atomic(const std::string& path, std::span<const ConstBuffer> parts) {
  AtomicFile f(path);
  for (const ConstBuffer& b : parts) f.write(b.data, b.size);
  f.commit();
}

void write_file_atomic(const std::string& path, const void* data, size_t n) {
  ConstBuffer part{data, n};
  write_file_atomic(path, std::span<const ConstBuffer>(&part, 1));
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}

void replace_dir_atomic(const std::string& staged_arg, const std::string& final_arg) {
  const std::string staged_dir = strip_slashes(staged_arg);
  const std::string final_dir = strip_slashes(final_arg);
  std::error_code ec;
  require(fs::is_directory(staged_dir, ec),
          "cannot commit " + staged_dir + " as " + final_dir +
              ": the staging directory does not exist; write it before committing");
  // The staged files must be durable before they become visible under the final name.
  fsync_dir(staged_dir);
  const std::string final_parent = parent_of(final_dir);
  const std::string staged_parent = parent_of(staged_dir);
  auto rename_error = [](const std::string& from, const std::string& to, int err) {
    if (err == EXDEV) {
      return Error("cannot rename " + from + " to " + to + ": " + std::strerror(err) +
                   "; put the staging directory on the same filesystem as " + to);
    }
    return Error("cannot rename " + from + " to " + to + ": " + write_problem(err, to));
  };

  bool final_exists = fs::exists(fs::symlink_status(final_dir, ec));
  if (!final_exists) {
    if (::rename(staged_dir.c_str(), final_dir.c_str()) != 0) {
      throw rename_error(staged_dir, final_dir, errno);
    }
    fsync_dir(final_parent);
    if (staged_parent != final_parent) fsync_dir(staged_parent);
    return;
  }
  require(fs::is_directory(final_dir, ec),
          "cannot commit " + staged_dir + " as " + final_dir + ": " + final_dir +
              " exists and is not a directory; remove it or choose another path");

#ifdef RENAME_EXCHANGE
  // Atomic swap: final_dir is always a complete directory.
  if (::renameat2(AT_FDCWD, staged_dir.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) ==
      0) {
    fsync_dir(final_parent);
    if (staged_parent != final_parent) fsync_dir(staged_parent);
    remove_quietly(staged_dir);  // now holds the old contents
    fsync_dir(staged_parent);
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != EOPNOTSUPP) {
    throw rename_error(staged_dir, final_dir, errno);
  }
#endif

  // Fallback: move the old one aside, move the new one in, drop the old one.
  const std::string old_dir = final_dir + ".old." + std::to_string(::getpid());
  remove_quietly(old_dir);
  if (::rename(final_dir.c_str(), old_dir.c_str()) != 0) {
    throw rename_error(final_dir, old_dir, errno);
  }
  if (::rename(staged_dir.c_str(), final_dir.c_str()) != 0) {
    int err = errno;
    ::rename(old_dir.c_str(), final_dir.c_str());  // put the old one back
    throw rename_error(staged_dir, final_dir, err);
  }
  fsync_dir(final_parent);
  if (staged_parent != final_parent) fsync_dir(staged_parent);
  remove_quietly(old_dir);
  fsync_dir(final_parent);
}

std::string strip_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace dtrain
