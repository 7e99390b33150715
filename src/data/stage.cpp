// stage_data (see stage.hpp): a listing of the source, a lock, a room check, a copy into a partial
// folder with checksums, a record of what was copied, and a rename.
#include "data/stage.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "data/mapped_file.hpp"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

struct SourceFile {
  std::string rel;
  int64_t bytes = 0;
  int64_t mtime = 0;
};

std::vector<SourceFile> list_files(const std::string& dir) {
  std::vector<SourceFile> files;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    const std::string rel = fs::relative(it->path(), dir).string();
    if (name[0] == '.' || (it->is_directory() && rel == "text")) {  // hidden; the built-in corpus's source text
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    const auto mtime = fs::last_write_time(it->path()).time_since_epoch();
    files.push_back({rel, int64_t(it->file_size()), int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(mtime).count())});
  }
  std::sort(files.begin(), files.end(), [](const SourceFile& a, const SourceFile& b) { return a.rel < b.rel; });
  return files;
}

// What the copy records of its source: each file's name, size and modification time.
nlohmann::json listing(const std::string& source, const std::vector<SourceFile>& files) {
  nlohmann::json j{{"source", fs::absolute(source).lexically_normal().string()}, {"files", nlohmann::json::array()}};
  for (const SourceFile& f : files) j["files"].push_back({f.rel, f.bytes, f.mtime});
  return j;
}

// Copies one file, returning the CRC-32C of what it read; the copy's checksum is compared after.
uint32_t copy_file(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  require(in >= 0, "data stage: cannot read " + from + ": check the file");
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<char> buf(size_t(8) << 20);
  uint32_t crc = 0;
  ssize_t n = 0;
  while (out >= 0 && (n = ::read(in, buf.data(), buf.size())) > 0) {
    crc = crc32c(buf.data(), size_t(n), crc);
    if (::write(out, buf.data(), size_t(n)) != n) n = -1;
    if (n < 0) break;
  }
  ::close(in);
  const bool ok = out >= 0 && n == 0 && ::fsync(out) == 0 && ::close(out) == 0;
  require(ok, "data stage: copying " + from + " to " + to + " failed (" + std::strerror(errno) +
                  "): check the room and permissions of the target");
  return crc;
}

void require_room(const std::string& target, int64_t bytes) {
  struct statvfs st {};
  require(::statvfs(target.c_str(), &st) == 0, "data stage: cannot read the free space of " + target);
  const int64_t room = int64_t(st.f_bavail) * int64_t(st.f_frsize);
  auto mib = [](int64_t b) {
    char s[32];
    std::snprintf(s, sizeof s, "%.1f MiB", double(b) / (1 << 20));
    return std::string(s);
  };
  require(room >= bytes, "data stage: " + target + " has " + mib(room) + " free but the data needs " + mib(bytes) +
                             ": free room there, or stage to a larger place (a node-local disk instead of /dev/shm), "
                             "or train from the shared copy");
}

// The copy itself, into `partial`, every file read back and compared.
void copy_all(const std::string& source, const std::vector<SourceFile>& files, const std::string& partial) {
  for (const SourceFile& f : files) {
    const std::string to = partial + "/" + f.rel;
    fs::create_directories(fs::path(to).parent_path());
    const uint32_t crc = copy_file(source + "/" + f.rel, to);
    require(checksum_file(to, "staged copy").crc32c == crc, "data stage: the copy of " + source + "/" + f.rel + " in " + to +
                                     " reads back other bytes: the target's storage is failing; stage elsewhere");
  }
}

}  // namespace

StageResult stage_data(const std::string& data_dir, const std::string& target) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string source = strip_slashes(data_dir);
  require(fs::is_directory(source), "data stage: " + source + " is not a data folder: prepare it first");
  const fs::path source_real = fs::weakly_canonical(source), target_real = fs::weakly_canonical(target);
  require(std::mismatch(source_real.begin(), source_real.end(), target_real.begin(), target_real.end()).first !=
              source_real.end(),
          "data stage: the target " + target + " is inside the data folder " + source + ": stage elsewhere");
  StageResult r;
  r.dir = strip_slashes(target) + "/" + fs::path(source).filename().string();
  require(fs::weakly_canonical(r.dir) != source_real,
          "data stage: the copy would be " + r.dir + ", the data folder itself: stage to another folder");
  std::error_code ec;
  fs::create_directories(target, ec);
  require(fs::is_directory(target), "data stage: cannot make the folder " + target + ": choose a writable place");
  const std::vector<SourceFile> files = list_files(source);
  for (const SourceFile& f : files) r.bytes += f.bytes, ++r.files;
  const std::string record = listing(source, files).dump();
  const int lock = ::open((r.dir + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  require(lock >= 0 && ::flock(lock, LOCK_EX) == 0, "data stage: cannot lock " + r.dir + ".lock: check the target");
  const std::string partial = r.dir + ".partial";
  bool made_partial = false;
  try {  // one copier per node: the others wait here, then find its copy
    const std::string recorded = r.dir + "/.staged.json";
    if (fs::exists(recorded) && read_file(recorded) == record) {
      ::close(lock);
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return r;
    }
    // only what staging made is ever replaced: a copy (.staged.json) or a copy cut short (.staging)
    for (const auto& [dir, mark] : {std::pair{r.dir, ".staged.json"}, {partial, ".staging"}})
      require(!fs::exists(dir) || fs::exists(dir + "/" + mark),
              "data stage: " + dir + " is there and is not a copy dtrain staged: choose another target, or move it away");
    fs::remove_all(partial);  // a copy cut short by an earlier kill
    require_room(target, r.bytes);
    fs::create_directories(partial);
    made_partial = true;
    write_file_atomic(partial + "/.staging", record);
    copy_all(source, files, partial);
    write_file_atomic(partial + "/.staged.json", record);
    fs::remove(partial + "/.staging");
    fs::remove_all(r.dir);
    fs::rename(partial, r.dir);
    fsync_dir(target);
  } catch (...) {
    if (made_partial) fs::remove_all(partial, ec);  // nothing half-copied stays behind
    ::close(lock);
    throw;
  }
  ::close(lock);
  r.copied = true;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace dtrain
