// Chrome trace JSON for rank timelines (see chrome_trace.hpp).
#include "metrics/chrome_trace.hpp"

#include <set>

#include "core/atomic_file.hpp"
#include "core/json.hpp"

namespace dtrain {

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events) {
  Json list = Json::array();
  std::set<int> ranks;
  for (const TraceEvent& e : events) ranks.insert(e.rank);
  for (int r : ranks)
    list.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", 0},
                    {"tid", r},
                    {"args", {{"name", "rank " + std::to_string(r)}}}});
  for (const TraceEvent& e : events)
    list.push_back(
        {{"name", e.name}, {"ph", "X"}, {"pid", 0}, {"tid", e.rank}, {"ts", e.start_s * 1e6}, {"dur", e.dur_s * 1e6}});
  Json doc = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
  write_file_atomic(path, doc.dump() + "\n");
}

}  // namespace dtrain
