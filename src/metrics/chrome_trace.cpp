// Chrome trace JSON for rank timelines (see chrome_trace.hpp).
#include "metrics/chrome_trace.hpp"

#include <set>

#include "core/atomic_file.hpp"

namespace dtrain {

namespace {

// A track's place among a rank's threads: the fixed ones first, communication groups after.
int track_order(const std::string& track) {
  static const char* fixed[] = {"steps", "phases", "compute", "checkpoint"};
  for (int i = 0; i < 4; ++i)
    if (track == fixed[i]) return i;
  return 4;
}

}  // namespace

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events,
                        const std::map<int, std::string>& process_names, const Json& other) {
  // (rank, track) → thread id, numbered in display order
  std::map<int, std::set<std::pair<int, std::string>>> tracks;
  for (const TraceEvent& e : events) tracks[e.rank].insert({track_order(e.track), e.track});
  std::map<std::pair<int, std::string>, int> tid;
  Json list = Json::array();
  for (const auto& [rank, names] : tracks) {
    const auto named = process_names.find(rank);
    list.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"args", {{"name", named != process_names.end() ? named->second : "rank " + std::to_string(rank)}}}});
    list.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
    int next = 0;
    for (const auto& [order, track] : names) {
      const int t = next++;
      tid[{rank, track}] = t;
      list.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", t}, {"args", {{"name", track}}}});
      list.push_back(
          {{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", rank}, {"tid", t}, {"args", {{"sort_index", t}}}});
    }
  }
  for (const TraceEvent& e : events) {
    Json ev = {{"name", e.name},
               {"cat", e.track},
               {"ph", "X"},
               {"pid", e.rank},
               {"tid", tid.at({e.rank, e.track})},
               {"ts", e.start_s * 1e6},
               {"dur", e.dur_s * 1e6}};
    if (!e.args.empty()) ev["args"] = Json::parse(e.args);
    list.push_back(std::move(ev));
  }
  Json doc = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}, {"otherData", other}};
  write_file_atomic(path, doc.dump() + "\n");
}

}  // namespace dtrain
