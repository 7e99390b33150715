// File store (see file_store.hpp). Key names are hex-encoded into file names.
#include "comm/file_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "comm/socket.hpp"
#include "core/descriptors.hpp"
#include "core/error.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

bool read_if_exists(const std::string& p, std::string& out) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {  // out of descriptors is not "no such key": waiting would never see it
    throw_if_out_of_descriptors(errno, "cannot read the file store's " + p);
    return false;
  }
  out.clear();
  char buf[65536];
  ssize_t r;
  while ((r = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(r));
  ::close(fd);
  return true;
}

// Holds an exclusive flock on the folder's lock file.
struct DirLock {
  int fd;
  explicit DirLock(const std::string& dir) {
    fd = ::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw_if_out_of_descriptors(errno, "cannot open the file store's lock file in " + dir);
    require(fd >= 0, "cannot open the file store's lock file in " + dir + ": " + std::strerror(errno));
    while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~DirLock() { ::close(fd); }
};

// Publishes a value whole: written beside the key, then renamed over it (no fsync: the store is
// for rendezvous, not durability).
void publish(const std::string& p, const std::string& value) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = p + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_if_out_of_descriptors(errno, "cannot write " + tmp);
  require(fd >= 0, "cannot write " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < value.size()) {
    ssize_t w = ::write(fd, value.data() + done, value.size() - done);
    if (w <= 0 && errno != EINTR) break;
    if (w > 0) done += size_t(w);
  }
  ::close(fd);
  require(done == value.size() && ::rename(tmp.c_str(), p.c_str()) == 0,
          "cannot write " + p + ": " + std::strerror(errno) + " (is the file store folder writable and not full?)");
}

}  // namespace

FileStore::FileStore(std::string dir, const std::string& token) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  require(fs::is_directory(dir_), "cannot create the file store folder " + dir_ + ": " + ec.message());
  DirLock lock(dir_);
  std::string have;
  const std::string tp = dir_ + "/TOKEN";
  if (read_if_exists(tp, have)) {
    require(tokens_equal(have, token), "the file store folder " + dir_ +
                                           " belongs to another job (its TOKEN differs): give this job a fresh "
                                           "folder or the same DTRAIN_JOB_TOKEN");
  } else {
    publish(tp, token);
  }
}

std::string FileStore::path(const std::string& key) const {
  static const char* hex = "0123456789abcdef";
  std::string name = "k_";
  for (unsigned char ch : key) {
    name += hex[ch >> 4];
    name += hex[ch & 15];
  }
  return dir_ + "/" + name;
}

void FileStore::set(const std::string& key, const std::string& value) { publish(path(key), value); }

std::optional<std::string> FileStore::try_get(const std::string& key) {
  std::string v;
  if (!read_if_exists(path(key), v)) return std::nullopt;
  return v;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  DirLock lock(dir_);
  int64_t cur = 0;
  std::string v;
  if (read_if_exists(path(key), v)) {
    require(v.size() == 8, "file store key '" + key + "' holds a non-counter value");
    std::memcpy(&cur, v.data(), 8);
  }
  cur += delta;
  publish(path(key), std::string(reinterpret_cast<const char*>(&cur), 8));
  return cur;
}

std::vector<std::string> FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  const Deadline deadline = deadline_in(timeout);  // cut to kLongestWait
  auto pause = Millis(1);
  for (;;) {
    std::vector<std::string> missing;
    for (const auto& k : keys)
      if (!fs::exists(path(k))) missing.push_back(k);
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) return missing;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, Millis(50));
  }
}

void FileStore::erase(const std::string& key) {
  std::error_code ec;
  fs::remove(path(key), ec);
}

}  // namespace dtrain
