// How much dtrun and dtrain print (--log-level, DTRAIN_LOG_LEVEL, like torchrun's LOGLEVEL): quiet,
// info (the default) or debug; what each prints is said where it is used (docs/cluster.md lists both).
#pragma once
#include <string>

namespace dtrain {

enum class LogLevel { quiet, info, debug };
const char* log_level_name(LogLevel level);
// `value` as a level; Error naming `what` (the option or variable) and the three levels otherwise.
LogLevel parse_log_level(const std::string& what, const std::string& value, const std::string& meaning);

// This process's level: DTRAIN_LOG_LEVEL, read once (info when unset); Error for a bad value.
LogLevel process_log_level();
// Whether lines of `level` are printed at this process's level.
inline bool logs_at(LogLevel level) { return int(process_log_level()) >= int(level); }

}  // namespace dtrain
