// A sweep's record, its points' states and their ranking (see sweep_report.hpp).
#include "train/report/sweep_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "metrics/html_page.hpp"
#include "metrics/run_data.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

Json pairs_json(const std::vector<std::pair<std::string, std::string>>& values) {
  Json out = Json::array();
  for (const auto& [k, v] : values) out.push_back(k + "=" + v);
  return out;
}

// "key=value" texts back into pairs (the key ends at the first '=').
std::vector<std::pair<std::string, std::string>> pairs_of(const Json& list, const std::string& source) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Json& kv : list) {
    require(kv.is_string() && kv.get_ref<const std::string&>().find('=') != std::string::npos,
            source + ": a point's value " + kv.dump() + " is not \"key=value\"; the file is damaged: remove the sweep "
            "folder's sweep.json only if you know its points, or sweep into another --out");
    const std::string& s = kv.get_ref<const std::string&>();
    out.emplace_back(s.substr(0, s.find('=')), s.substr(s.find('=') + 1));
  }
  return out;
}

std::vector<std::string> strings_of(const Json& list, const std::string& what, const std::string& source) {
  require(list.is_array(), source + ": \"" + what + "\" is not a list; the file is damaged: sweep into another --out");
  std::vector<std::string> out;
  for (const Json& s : list) {
    require(s.is_string(), source + ": \"" + what + "\" holds " + s.dump() + ", not text; the file is damaged: "
                           "sweep into another --out");
    out.push_back(s.get<std::string>());
  }
  return out;
}

// The best of `field` over the records of type `type`: the least, or the most (`most`); NaN if none.
double best_of(const RunData& run, const char* type, const char* field, bool most) {
  double best = NAN;
  for (const Json* r : run.records_of(type)) {
    const double v = json_number(*r, field);
    if (std::isfinite(v) && (!std::isfinite(best) || (most ? v > best : v < best))) best = v;
  }
  return best;
}

// What a point is ranked by, from its records and summary: its best validation loss (summary.json's,
// else the epoch ends', else any validation's) and, for a classifier, its best validation accuracy.
void read_best(const RunData& run, PointState& s) {
  s.classifier = json_member(run.summary, "test_accuracy").is_number() ||
                 std::any_of(run.records.begin(), run.records.end(),
                             [](const Json& r) { return r.contains("accuracy") || r.contains("val_accuracy"); });
  s.best_accuracy = best_of(run, "epoch", "val_accuracy", true);
  if (!std::isfinite(s.best_accuracy)) s.best_accuracy = best_of(run, "val", "accuracy", true);
  s.best_loss = json_number(run.summary, "best_val_loss");
  if (!std::isfinite(s.best_loss)) s.best_loss = best_of(run, "epoch", "val_loss", false);
  if (!std::isfinite(s.best_loss)) s.best_loss = best_of(run, "val", "loss", false);
}

// A row's place: points with a figure first, best first (ties by grid order), then the others.
bool ranks_before(const SweepRow& a, const SweepRow& b, bool by_accuracy) {
  const bool fa = std::isfinite(a.figure), fb = std::isfinite(b.figure);
  if (fa != fb) return fa;
  if (fa && a.figure != b.figure) return by_accuracy ? a.figure > b.figure : a.figure < b.figure;
  return a.point < b.point;
}

}  // namespace

bool SweepRecord::same_sweep(const SweepRecord& o) const {
  return config == o.config && sets == o.sets && grid == o.grid;
}

std::string SweepRecord::describe() const {
  std::string s = "config " + config;
  for (const std::string& set : sets) s += " --set " + set;
  s += " --grid \"";
  for (size_t i = 0; i < grid.size(); ++i) {
    s += (i ? " " : "") + grid[i].first + "=";
    for (size_t j = 0; j < grid[i].second.size(); ++j) s += (j ? "," : "") + grid[i].second[j];
  }
  return s + "\"";
}

std::string sweep_status_path(const std::string& sweep_dir, const std::string& point) {
  return (fs::path(sweep_dir) / "status" / point).string();
}

bool is_sweep_dir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kSweepRecordName, ec);
}

SweepRecord read_sweep_record(const std::string& dir) {
  const std::string path = (fs::path(dir) / kSweepRecordName).string();
  const Json j = parse_json(read_file(path, kMaxSmallFileBytes, "sweep record"), path);
  require(j.is_object() && j.contains("grid") && j.contains("points"),
          path + " is not a dtrain sweep record (no \"grid\" and \"points\"): give the folder `dtrain sweep` wrote");
  SweepRecord r;
  r.config = json_get<std::string>(j, "config", path);
  r.sets = strings_of(json_at(j, "sets", path), "sets", path);
  r.labels = strings_of(json_at(j, "labels", path), "labels", path);
  for (const Json& axis : json_at(j, "grid", path))
    r.grid.emplace_back(json_get<std::string>(axis, "key", path), strings_of(json_at(axis, "values", path), "values", path));
  for (const Json& p : json_at(j, "points", path))
    r.points.push_back({json_get<std::string>(p, "name", path), pairs_of(json_at(p, "values", path), path)});
  return r;
}

void write_sweep_record(const std::string& dir, const SweepRecord& r) {
  Json j = Json::object();
  j["config"] = r.config;
  j["sets"] = r.sets;
  j["grid"] = Json::array();
  for (const auto& [key, values] : r.grid) j["grid"].push_back({{"key", key}, {"values", values}});
  j["labels"] = r.labels;
  j["points"] = Json::array();
  for (const SweepPointRecord& p : r.points)
    j["points"].push_back(
        {{"name", p.name}, {"run_dir", (fs::path(dir) / p.name).string()}, {"values", pairs_json(p.values)}});
  write_file_atomic((fs::path(dir) / kSweepRecordName).string(), j.dump(2) + "\n");
}

bool run_finished(const std::string& run_dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(run_dir) / "summary.json", ec);
}

std::string PointState::describe() const {
  switch (kind) {
    case finished: return "finished";
    case running_or_stopped: return "running or stopped";
    case failed: return "failed (exit status " + std::to_string(exit_status) + ")";
    case not_started: break;
  }
  return "not started";
}

PointState read_point_state(const std::string& sweep_dir, const std::string& point) {
  PointState s;
  s.best_loss = s.best_accuracy = NAN;
  const std::string run_dir = (fs::path(sweep_dir) / point).string();
  std::error_code ec;
  if (fs::is_regular_file(fs::path(run_dir) / "metrics.jsonl", ec)) {
    const RunData run = load_run(run_dir);
    s.has_records = true;
    read_best(run, s);
    s.steps = std::isfinite(json_number(run.summary, "steps")) ? int64_t(json_number(run.summary, "steps")) : -1;
    for (const Json& r : run.records)
      if (const double step = json_number(r, "step"); std::isfinite(step)) s.steps = std::max(s.steps, int64_t(step));
    s.kind = PointState::running_or_stopped;
  }
  if (run_finished(run_dir)) {
    s.kind = PointState::finished;
    return s;
  }
  const std::string status = sweep_status_path(sweep_dir, point);
  if (fs::is_regular_file(status, ec)) {
    const std::string text = read_file(status, 64, "sweep status");
    const int code = std::atoi(text.c_str());
    if (code != 0 && code != 79) {  // 79: saved before a time limit, to be requeued (job_exit.hpp)
      s.kind = PointState::failed;
      s.exit_status = code;
    }
  }
  return s;
}

std::vector<std::vector<std::string>> SweepRanking::cells() const {
  std::vector<std::vector<std::string>> out;
  int rank = 0;
  for (const SweepRow& row : rows) {
    const SweepPointRecord& p = record.points[row.point];
    const bool ranked = std::isfinite(row.figure);
    std::vector<std::string> line{ranked ? std::to_string(++rank) : "-"};
    for (const auto& kv : p.values) line.push_back(kv.second);
    line.push_back(!ranked ? "-" : by_accuracy ? format_number(100 * row.figure, 2) + "%" : format_number(row.figure, 4));
    line.push_back(row.state.steps >= 0 ? std::to_string(row.state.steps) : "-");
    line.push_back(row.state.describe());
    line.push_back(p.name);
    out.push_back(std::move(line));
  }
  return out;
}

SweepRanking rank_sweep(const std::string& sweep_dir) {
  SweepRanking r;
  r.record = read_sweep_record(sweep_dir);
  bool any = false, all_classifiers = true;  // a grid over model.kind may mix them: then all by loss
  for (size_t i = 0; i < r.record.points.size(); ++i) {
    const PointState s = read_point_state(sweep_dir, r.record.points[i].name);
    if (s.kind != PointState::not_started) {
      any = true;
      all_classifiers = all_classifiers && s.classifier;
    }
    r.rows.push_back({i, s, NAN});
  }
  r.by_accuracy = any && all_classifiers;
  for (SweepRow& row : r.rows) row.figure = r.by_accuracy ? row.state.best_accuracy : row.state.best_loss;
  std::stable_sort(r.rows.begin(), r.rows.end(),
                   [&](const SweepRow& a, const SweepRow& b) { return ranks_before(a, b, r.by_accuracy); });
  r.head = {"rank"};
  for (const std::string& label : r.record.labels) r.head.push_back(label);
  r.head.insert(r.head.end(), {r.by_accuracy ? "best val accuracy" : "best val loss", "steps", "state", "run dir"});
  return r;
}

std::string sweep_table_text(const SweepRanking& ranking) {
  std::vector<std::vector<std::string>> lines = ranking.cells();
  lines.insert(lines.begin(), ranking.head);
  std::vector<size_t> width(ranking.head.size(), 0);
  for (const auto& line : lines)
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  std::string out;
  for (const auto& line : lines) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c)
      text += line[c] + (c + 1 < line.size() ? std::string(width[c] - line[c].size() + 2, ' ') : "");
    out += text + "\n";
  }
  return out;
}

std::string sweep_table_html(const SweepRanking& ranking, const std::string& sweep_dir) {
  size_t started = 0;
  for (const SweepRow& row : ranking.rows) started += row.state.has_records;
  const std::string note = "The sweep in " + sweep_dir + ": " + ranking.record.describe() + ". " +
                           std::to_string(started) + " of " + std::to_string(ranking.rows.size()) +
                           " points have records; the sections below overlay them.";
  return html_section("sweep", "Sweep", html_table(ranking.head, ranking.cells()) + html_note(note));
}

}  // namespace dtrain
