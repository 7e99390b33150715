// Timelines as Chrome trace JSON (ui.perfetto.dev, chrome://tracing): every rank a process, every
// track of it (steps, phases, compute, a communication group, the checkpoint writer) a thread,
// every span a complete event ("ph": "X"). Used for a run's trace.json and `dtrain plan --trace`.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/json.hpp"

namespace dtrain {

struct TraceEvent {
  int rank = 0;
  std::string track = "compute";
  std::string name;  // e.g. "0F3", "block.1 B", "allreduce sum"
  double start_s = 0.0, dur_s = 0.0;
  std::string args;  // a JSON object's text, or empty
};

// Writes {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": other} atomically: per rank a
// process named by `process_names` (default "rank N"), per track a thread in a fixed order (steps,
// phases, compute, checkpoint, then communication groups by name), then the events with ts and dur
// in microseconds. Throws Error when the file cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events,
                        const std::map<int, std::string>& process_names = {}, const Json& other = Json::object());

}  // namespace dtrain
