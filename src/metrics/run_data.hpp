// A run dir read back for reports: the records of metrics.jsonl, summary.json and config.json (the
// last two optional: a run still going has no summary yet), and numbers read out of them leniently.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/json.hpp"

namespace dtrain {

struct RunData {
  std::string dir;    // as given
  std::string label;  // what its series and columns are called: the folder's name
  std::vector<Json> records;  // metrics.jsonl, in order
  Json summary;               // null: no summary.json
  Json config;                // null: no config.json

  std::vector<const Json*> records_of(std::string_view type) const;
};

// Reads the run dir `dir`. Error naming the path and the fix when it is not a folder or holds no
// metrics.jsonl, or when a line of metrics.jsonl or summary.json / config.json is not JSON; an
// unfinished last line (no newline: the run is writing it) is left out.
RunData load_run(const std::string& dir);

// j's member `key` (nested names joined by '.'); a null JSON value when j is not an object or the
// member is absent.
const Json& json_member(const Json& j, std::string_view key);
// The member as a number; NaN when j is not an object, or the
// member is absent, null or not a number.
double json_number(const Json& j, std::string_view key);
// The member as text: a string as it is, anything else as JSON text; "" when absent or null.
std::string json_text(const Json& j, std::string_view key);

}  // namespace dtrain
