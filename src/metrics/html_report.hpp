// `dtrain report`: one self-contained HTML page (inline SVG and CSS, no script, nothing fetched) about
// a run, or several runs overlaid, from their metrics.jsonl, summary.json and config.json.
#pragma once
#include <string>
#include <vector>

#include "metrics/run_data.hpp"

namespace dtrain {

// The page about `runs` (at least one, or none when `lead` says why). Runs that share a folder name
// are labelled by their paths. `lead`: sections (HTML) to put first, e.g. a sweep's ranking.
std::string run_report_html(std::vector<RunData> runs, const std::string& lead = "");

// Where the page goes without --out: RUN/report.html for one run, report.html here for several.
std::string default_report_path(const std::vector<std::string>& run_dirs);

// Reads the run dirs (load_run's errors) and writes the page to `out` atomically; `lead` as above.
void write_run_report(const std::vector<std::string>& run_dirs, const std::string& out, const std::string& lead = "");

}  // namespace dtrain
