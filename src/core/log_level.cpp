// LogLevel's names and the process's level (see log_level.hpp).
#include "core/log_level.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace dtrain {

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::quiet: return "quiet";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "info";
}

LogLevel parse_log_level(const std::string& what, const std::string& value, const std::string& meaning) {
  for (LogLevel level : {LogLevel::quiet, LogLevel::info, LogLevel::debug})
    if (value == log_level_name(level)) return level;
  throw Error(what + " '" + value + "' is not quiet, info or debug (" + meaning + ")");
}

LogLevel process_log_level() {
  static const LogLevel level = [] {
    const char* v = std::getenv("DTRAIN_LOG_LEVEL");
    return v && *v ? parse_log_level("DTRAIN_LOG_LEVEL", v,
                                     "what dtrun and dtrain print: errors and results only, also their progress, "
                                     "or also how each rank was placed and set up")
                   : LogLevel::info;
  }();
  return level;
}

}  // namespace dtrain
