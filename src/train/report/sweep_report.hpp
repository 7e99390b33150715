// A sweep as its folder keeps it: DIR/sweep.json (what `dtrain sweep` was asked, each point's run dir
// and values), each point's state read from its run dir, and the points ranked by their validation
// metric for `dtrain report DIR` (a text table for the terminal, a section for the HTML page).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// One point: its run dir's name inside the sweep folder and its key=value pairs.
struct SweepPointRecord {
  std::string name;
  std::vector<std::pair<std::string, std::string>> values;
};

// DIR/sweep.json. Two records describe the same sweep when config, sets and grid agree.
struct SweepRecord {
  std::string config;             // the config file, as an absolute path
  std::vector<std::string> sets;  // the --set key=value given to every point, in order
  std::vector<std::pair<std::string, std::vector<std::string>>> grid;  // key and values, in order
  std::vector<std::string> labels;                                     // each key's name in point names
  std::vector<SweepPointRecord> points;
  bool same_sweep(const SweepRecord& other) const;
  std::string describe() const;  // "config C, --set …, grid k=a,b …" for messages
};

inline const char* kSweepRecordName = "sweep.json";
// Where a point's last exit status is kept (by the local launcher and the batch script):
// DIR/status/NAME, one line, the number.
std::string sweep_status_path(const std::string& sweep_dir, const std::string& point);

// Whether DIR holds a sweep.json.
bool is_sweep_dir(const std::string& dir);
// DIR/sweep.json read; Error naming the file and the fix when it is not a sweep record.
SweepRecord read_sweep_record(const std::string& dir);
// DIR/sweep.json written atomically.
void write_sweep_record(const std::string& dir, const SweepRecord& record);

// What a point's run dir (and its status file) says about it.
struct PointState {
  enum Kind { not_started, running_or_stopped, finished, failed } kind = not_started;
  int exit_status = 0;  // the last run's, when failed
  int64_t steps = -1;   // optimizer steps done; -1 unknown
  double best_loss = 0.0, best_accuracy = 0.0;  // best validation loss and accuracy; NaN when none yet
  bool classifier = false;  // its records carry accuracy: ranked by it
  bool has_records = false;  // its run dir holds metrics.jsonl (the report can overlay it)
  std::string describe() const;  // "finished", "failed (exit status 2)", …
};
// A run that wrote summary.json (its last act) is finished.
bool run_finished(const std::string& run_dir);
PointState read_point_state(const std::string& sweep_dir, const std::string& point);

// The sweep's points ranked, best first: by best validation loss ascending, or by accuracy descending
// when every point with a figure is a classifier; points without a figure follow in grid order.
struct SweepRow {
  size_t point;  // index into record.points
  PointState state;
  double figure;  // what it is ranked by: best_accuracy (by_accuracy) or best_loss; NaN: none yet
};
struct SweepRanking {
  SweepRecord record;
  std::vector<std::string> head;  // rank, each key's label, the metric, steps, state
  std::vector<SweepRow> rows;
  bool by_accuracy = false;
  std::vector<std::vector<std::string>> cells() const;  // the rows as the table's text
};
SweepRanking rank_sweep(const std::string& sweep_dir);
// The ranking as an aligned text table (a line per point, the head first).
std::string sweep_table_text(const SweepRanking& ranking);
// The ranking as a section of the report page.
std::string sweep_table_html(const SweepRanking& ranking, const std::string& sweep_dir);

}  // namespace dtrain
