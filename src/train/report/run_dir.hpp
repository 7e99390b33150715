// The run directory's guard and history: one writer at a time (an exclusive lock held for the run's
// life), one clear line when the folder cannot be used, logs rewound to the checkpoint a run resumes, and a
// warning when the folder lies on purged scratch (DTRAIN_SCRATCH).
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

// Creates run_dir if needed and takes an exclusive lock on run_dir/run.lock (flock), which the
// kernel drops when the process ends, however it ends. The file names the holder (pid, host, start
// time), so that a second writer stops with one line naming it. A path that is a file, a folder that
// cannot be created or written (read-only file system, permissions): one line naming the path and
// the fix. On a file system without locks, a warning line and no lock.
class RunDirLock {
 public:
  explicit RunDirLock(const std::string& run_dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

// Where the run's logs stood when a checkpoint was written (bytes of metrics.jsonl, the TensorBoard
// events file and its bytes); metrics_bytes < 0: no marks (a run that starts afresh).
struct LogMarks {
  int64_t metrics_bytes = -1;
  std::string events_file;  // file name inside the run dir
  int64_t events_bytes = -1;
};

// Cuts the logs that a stopped attempt wrote after `marks` (a resumed run then appends where the
// checkpoint left off, and no step is logged twice): metrics.jsonl back to metrics_bytes, the events
// file back to events_bytes, events files created after it removed. Without marks the run starts
// afresh: metrics.jsonl and every events file are removed. Returns the events file to continue ("":
// start a new one).
std::string rewind_logs(const std::string& run_dir, const LogMarks& marks);

// The folder of DTRAIN_SCRATCH (folders separated by ':', the ones the site purges) that holds
// run_dir, or "" (none set, or run_dir outside them).
std::string scratch_holding(const std::string& run_dir, const char* scratch_list);
// One warning line on stderr when run_dir lies under DTRAIN_SCRATCH.
void warn_if_scratch(const std::string& run_dir);

}  // namespace dtrain
