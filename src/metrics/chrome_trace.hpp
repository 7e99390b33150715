// Timelines as Chrome trace JSON (chrome://tracing, ui.perfetto.dev): one thread per rank, one
// complete event ("ph": "X") per action; used for simulated and measured pipeline steps.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

struct TraceEvent {
  int rank = 0;
  std::string name;  // e.g. "0F3"
  double start_s = 0.0, dur_s = 0.0;
};

// Writes {"traceEvents": [...], "displayTimeUnit": "ms"} atomically: per rank a thread_name record
// "rank N" (pid 0, tid N), then the events with ts and dur in microseconds. Throws Error when the
// file cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events);

}  // namespace dtrain
