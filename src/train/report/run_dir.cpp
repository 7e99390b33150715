// Run directory guard and log rewinding (see run_dir.hpp).
#include "train/report/run_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "core/error.hpp"
#include "core/host_name.hpp"
#include "core/output_path.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The reason a folder cannot be written, as the fix needs it.
std::string unwritable(const std::string& dir, int err) {
  if (err == EROFS) return "run dir " + dir + " is on a read-only file system: choose a writable --run-dir";
  if (err == EACCES || err == EPERM)
    return "run dir " + dir + " is not writable (permission denied): choose a writable --run-dir";
  return "cannot write in run dir " + dir + " (" + std::strerror(err) + "): choose a writable --run-dir";
}

}  // namespace

RunDirLock::RunDirLock(const std::string& run_dir) {
  std::error_code ec;
  require(!fs::exists(run_dir, ec) || fs::is_directory(run_dir, ec),
          "run dir " + run_dir + " is a file, not a folder: choose another --run-dir");
  std::string what;  // a checkpoint's files are its writer's: a run's logs never go among them
  if (const std::string around = enclosing_checkpoint_or_run(run_dir, &what); what == "checkpoint")
    throw Error("run dir " + run_dir + " is inside the checkpoint " + around + ": choose another --run-dir");
  for (const char* data : {"train.bin", "train.images"})
    require(!fs::exists(fs::path(run_dir) / data, ec),
            "run dir " + run_dir + " holds prepared data (" + data + "): choose another --run-dir, and pass the "
            "data as data.dir");
  fs::create_directories(run_dir, ec);
  if (ec) throw Error(unwritable(run_dir, ec.value()));
  const std::string path = run_dir + "/run.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(unwritable(run_dir, errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      char holder[256] = {};
      const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
      std::string who = n > 0 ? std::string(holder, size_t(n)) : "another process";
      while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
      ::close(fd_);
      fd_ = -1;
      throw Error("run dir " + run_dir + " is in use by another dtrain run (" + who +
                  "): wait for it to end, or choose another --run-dir");
    }
    std::fprintf(stderr, "dtrain: warning: cannot lock run dir %s (%s): nothing stops a second run from writing "
                 "into it at the same time\n", run_dir.c_str(), std::strerror(err));
    return;
  }
  const std::string me = "pid " + std::to_string(::getpid()) + " on host " + host_name() + " since " + utc_now() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size()))
    throw Error(unwritable(run_dir, errno));
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // drops the lock; the file stays (removing it would race a new holder)
}

std::string rewind_logs(const std::string& run_dir, const LogMarks& marks) try {
  const fs::path dir(run_dir), metrics = dir / "metrics.jsonl";
  const bool afresh = marks.metrics_bytes < 0;
  if (fs::exists(metrics)) {
    if (afresh)
      fs::remove(metrics);
    else if (int64_t(fs::file_size(metrics)) > marks.metrics_bytes)
      fs::resize_file(metrics, uintmax_t(marks.metrics_bytes));
  }
  // Event files are named events.out.tfevents.<unix seconds>.<host>[.n]: later names are later files.
  const std::string prefix = "events.out.tfevents.";
  auto seconds_of = [&](const std::string& name) { return std::atoll(name.c_str() + prefix.size()); };
  const bool have_events = marks.events_file.rfind(prefix, 0) == 0;
  bool keep_found = false;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    if (afresh) {
      fs::remove(e.path());
    } else if (have_events && name == marks.events_file) {
      keep_found = true;
      if (int64_t(e.file_size()) > marks.events_bytes) fs::resize_file(e.path(), uintmax_t(marks.events_bytes));
    } else if (have_events && seconds_of(name) >= seconds_of(marks.events_file)) {
      fs::remove(e.path());  // opened by an attempt after the checkpoint
    }
  }
  return keep_found ? marks.events_file : "";
} catch (const fs::filesystem_error& e) {
  throw Error("cannot rewind the logs in run dir " + run_dir + " (" + e.code().message() + " on " +
              e.path1().string() + "): check the run dir's permissions");
}

std::string scratch_holding(const std::string& run_dir, const char* scratch_list) {
  if (!scratch_list || !*scratch_list) return "";
  std::error_code ec;
  const fs::path run = fs::weakly_canonical(fs::absolute(run_dir, ec), ec);
  const std::string list = scratch_list;
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(':', at), list.size());
    const std::string folder = list.substr(at, end - at);
    at = end + 1;
    if (folder.empty()) continue;
    const fs::path base = fs::weakly_canonical(fs::absolute(folder, ec), ec);
    const fs::path rel = run.lexically_relative(base);
    if (!rel.empty() && *rel.begin() != "..") return folder;
  }
  return "";
}

void warn_if_scratch(const std::string& run_dir) {
  const std::string folder = scratch_holding(run_dir, std::getenv("DTRAIN_SCRATCH"));
  if (folder.empty()) return;
  std::fprintf(stderr, "dtrain: warning: run dir %s is under %s, which DTRAIN_SCRATCH marks as purged scratch: its "
               "checkpoints may vanish before the run resumes; keep run dirs on a project or home file system "
               "(docs/cluster.md)\n", run_dir.c_str(), folder.c_str());
  std::fflush(stderr);
}

}  // namespace dtrain
