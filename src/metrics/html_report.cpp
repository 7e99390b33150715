// The report page (see html_report.hpp): its header, then the sections of report_sections.hpp.
#include "metrics/html_report.hpp"

#include <cmath>
#include <filesystem>
#include <set>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/output_path.hpp"
#include "metrics/html_page.hpp"
#include "metrics/report_sections.hpp"
#include "metrics/svg_chart.hpp"

namespace dtrain {

namespace {

// "transformer, 2 ranks, cpu" from what the run says about itself.
std::string run_line(const RunData& r) {
  std::string kind = json_text(r.summary, "model_kind");
  if (kind.empty()) kind = json_text(r.config, "model.kind");
  std::string device = json_text(r.summary, "device");
  if (device.empty()) device = json_text(r.config, "train.device");
  const double ranks = json_number(r.summary, "world_size");
  std::string s = kind.empty() ? "model kind unknown" : kind;
  if (std::isfinite(ranks)) s += ", " + format_number(ranks, 0) + (ranks == 1 ? " rank" : " ranks");
  if (!device.empty()) s += ", " + device;
  return s;
}

}  // namespace

std::string run_report_html(std::vector<RunData> runs, const std::string& lead) {
  DT_ASSERT(!runs.empty() || !lead.empty());
  if (runs.empty()) return html_document("dtrain report", "<h1>dtrain report</h1>\n", lead);
  std::set<std::string> seen, shared;
  for (const RunData& r : runs)
    if (!seen.insert(r.label).second) shared.insert(r.label);
  for (RunData& r : runs)
    if (shared.count(r.label)) r.label = r.dir;

  std::string header = "<h1>dtrain report</h1>\n";
  for (size_t i = 0; i < runs.size(); ++i)
    header += "<p><code>" + xml_escape(runs[i].dir) + "</code> — " + xml_escape(run_line(runs[i])) + "</p>\n";
  std::string body = lead + "<div class=\"pair\">\n" + report_overview(runs) + report_results(runs) + "</div>\n" +
                     report_loss(runs) + report_experts(runs) + report_throughput(runs) +
                     report_phases(runs) + report_communication(runs) + report_resources(runs) +
                     report_checkpoints(runs) + report_config(runs);
  std::string title = "dtrain report: ";
  for (size_t i = 0; i < runs.size(); ++i) title += (i ? ", " : "") + runs[i].label;
  return html_document(title, header, body);
}

std::string default_report_path(const std::vector<std::string>& run_dirs) {
  if (run_dirs.size() == 1) return (std::filesystem::path(run_dirs[0]) / "report.html").string();
  return "report.html";
}

void write_run_report(const std::vector<std::string>& run_dirs, const std::string& out, const std::string& lead) {
  require(!run_dirs.empty() || !lead.empty(), "dtrain report needs a run dir: dtrain report RUN [RUN ...] [--out FILE]");
  check_output_file(out, "--out", {"report.html"});
  std::vector<RunData> runs;
  for (const std::string& d : run_dirs) runs.push_back(load_run(d));
  write_file_atomic(out, run_report_html(std::move(runs), lead));
}

}  // namespace dtrain
