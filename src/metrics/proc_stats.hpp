// What /proc says about this process: parsers of the text of /proc/self/stat, status and io and of
// /proc/uptime (pure, so tests feed them fixed text), and a reader of such a file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dtrain {

// /proc/self/stat: CPU time in user and system mode and the start time, in clock ticks
// (sysconf(_SC_CLK_TCK) a second); the start time counts from the machine's boot.
struct ProcCpuTicks {
  int64_t user = 0, system = 0, start = 0;
};
// nullopt when the text is not a stat line. The process name (field 2) may hold spaces and
// parentheses: the fields are counted from its last ')'.
std::optional<ProcCpuTicks> parse_proc_stat(std::string_view text);

// /proc/self/status: resident memory (VmRSS) and the number of threads; a field the text lacks
// stays nullopt.
struct ProcStatus {
  std::optional<double> rss_mb;  // MiB
  std::optional<int> threads;
};
ProcStatus parse_proc_status(std::string_view text);

// /proc/self/io: bytes the process (its threads, and its children that it waited for) made the
// storage read and write, since it started; nullopt when either field is missing.
struct ProcIo {
  double read_mb = 0.0, write_mb = 0.0;  // MiB
};
std::optional<ProcIo> parse_proc_io(std::string_view text);

// /proc/uptime: seconds since the machine booted (its first number).
std::optional<double> parse_proc_uptime(std::string_view text);

// The whole text of a /proc file; nullopt when it cannot be read (/proc/self/io may be closed to a
// process in a container).
std::optional<std::string> read_proc_file(const char* path);

}  // namespace dtrain
