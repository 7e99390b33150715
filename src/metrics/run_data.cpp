// Reading a run dir back (see run_data.hpp).
#include "metrics/run_data.hpp"

#include <cmath>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

// The folder's own name, also for "runs/a/" and ".".
std::string folder_name(const std::string& dir) {
  fs::path p = fs::absolute(fs::path(dir)).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().empty() ? dir : p.filename().string();
}

// The member `key` ("a.b.c") of j, or nullptr.
const Json* member(const Json& j, std::string_view key) {
  const Json* at = &j;
  while (true) {
    if (!at->is_object()) return nullptr;
    const size_t dot = key.find('.');
    const auto it = at->find(std::string(key.substr(0, dot)));
    if (it == at->end()) return nullptr;
    at = &*it;
    if (dot == std::string_view::npos) return at;
    key.remove_prefix(dot + 1);
  }
}

Json optional_json(const std::string& path) {
  if (!fs::exists(path)) return Json();
  return parse_json(read_file(path, kMaxSmallFileBytes, "run file"), path);
}

}  // namespace

std::vector<const Json*> RunData::records_of(std::string_view type) const {
  std::vector<const Json*> out;
  for (const Json& r : records)
    if (const Json* t = member(r, "type"); t && t->is_string() && t->get_ref<const std::string&>() == type)
      out.push_back(&r);
  return out;
}

RunData load_run(const std::string& dir) {
  std::error_code ec;
  require(fs::is_directory(dir, ec), "run dir " + dir + " does not exist or is not a folder: give the folder "
                                     "`dtrain train` wrote (its --run-dir, runs/latest by default)");
  const std::string log = (fs::path(dir) / "metrics.jsonl").string();
  require(fs::is_regular_file(log, ec), dir + " is not a run dir: it holds no metrics.jsonl; give the folder "
                                        "`dtrain train` wrote (its --run-dir, runs/latest by default)");
  RunData run;
  run.dir = dir;
  run.label = folder_name(dir);
  const std::string text = read_file(log);
  size_t at = 0;
  for (int64_t line = 1; at < text.size(); ++line) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) break;  // unfinished: the run is writing it
    const std::string_view row(text.data() + at, end - at);
    at = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = log + " line " + std::to_string(line);
    Json j = parse_json(row, where);
    require(j.is_object(), where + " is a JSON " + std::string(j.type_name()) +
                               ", not a record ({\"type\": ...}): delete the line or restore the file");
    run.records.push_back(std::move(j));
  }
  run.summary = optional_json((fs::path(dir) / "summary.json").string());
  run.config = optional_json((fs::path(dir) / "config.json").string());
  return run;
}

const Json& json_member(const Json& j, std::string_view key) {
  static const Json none;
  const Json* m = member(j, key);
  return m ? *m : none;
}

double json_number(const Json& j, std::string_view key) {
  const Json* m = member(j, key);
  return m && m->is_number() ? m->get<double>() : NAN;
}

std::string json_text(const Json& j, std::string_view key) {
  const Json* m = member(j, key);
  if (!m || m->is_null()) return "";
  return m->is_string() ? m->get<std::string>() : m->dump();
}

}  // namespace dtrain
