// The HTML frame of reports (see html_page.hpp): one inline style sheet, system fonts only.
#include "metrics/html_page.hpp"

#include <cmath>
#include <cstdio>
#include <map>

#include "metrics/svg_chart.hpp"

namespace dtrain {

namespace {

const char* kStyle = R"(
:root { --ink: #1f2328; --muted: #5c6370; --line: #dde1e6; --soft: #eef0f3; --bg: #f5f6f8; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { background: #1e2939; color: #ffffff; padding: 22px 32px 18px; }
header h1 { margin: 0 0 6px; font-size: 22px; font-weight: 600; letter-spacing: 0.2px; }
header p { margin: 2px 0; color: #c5cdd8; font-size: 13px; }
header code { color: #ffffff; }
main { max-width: 1340px; margin: 0 auto; padding: 8px 28px 40px; }
section { background: #ffffff; border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px 12px;
          margin: 16px 0; }
h2 { font-size: 17px; font-weight: 600; margin: 0 0 10px; }
h3 { font-size: 13px; font-weight: 600; margin: 12px 0 4px; color: var(--muted); }
.pair { display: flex; flex-wrap: wrap; gap: 0 16px; align-items: stretch; }
.pair > section { flex: 1 1 420px; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; margin: 6px 0; }
svg.chart { max-width: 100%; height: auto; border: 1px solid var(--soft); border-radius: 6px; }
.charts > svg.chart { flex: 1 1 520px; max-width: 660px; width: 100%; }
@media (min-width: 1100px) { .charts > svg.chart { max-width: calc(50% - 8px); } }
.tables { display: flex; flex-wrap: wrap; gap: 10px 28px; align-items: flex-start; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0 10px; }
caption { text-align: left; font-weight: 600; color: var(--muted); padding: 2px 0 6px; white-space: nowrap; }
th, td { padding: 4px 12px; border-bottom: 1px solid var(--soft); text-align: left; vertical-align: top; }
th { background: #f3f5f7; font-weight: 600; border-bottom: 1px solid var(--line); }
td:first-child { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
p.note { color: var(--muted); margin: 6px 0; }
pre { background: #f7f8fa; border: 1px solid var(--soft); border-radius: 6px; padding: 10px 12px; margin: 4px 0 10px;
      font: 12px/1.45 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; overflow: auto; max-height: 460px; }
footer { color: var(--muted); font-size: 12px; text-align: center; padding: 4px 0 24px; }
)";

// Whether a cell reads as a number (right-aligned): digits with a sign, separators, a unit after.
bool numeric(const std::string& s) {
  if (s == "–") return true;
  size_t i = s.empty() || (s[0] != '-' && s[0] != '+') ? 0 : 1;
  return i < s.size() && s[i] >= '0' && s[i] <= '9';
}

}  // namespace

std::string html_document(const std::string& title, const std::string& header, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>" +
         xml_escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<header>\n" + header +
         "</header>\n<main>\n" + body + "</main>\n<footer>written by dtrain</footer>\n</body>\n</html>\n";
}

std::string html_section(const std::string& id, const std::string& title, const std::string& content) {
  return "<section id=\"" + xml_escape(id) + "\">\n<h2>" + xml_escape(title) + "</h2>\n" + content + "</section>\n";
}

std::string html_note(const std::string& text) { return "<p class=\"note\">" + xml_escape(text) + "</p>\n"; }

std::string html_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                       const std::string& caption, bool numbers_right) {
  std::string s = "<table>\n";
  if (!caption.empty()) s += "<caption>" + xml_escape(caption) + "</caption>\n";
  s += "<thead><tr>";
  for (const std::string& h : head) s += "<th>" + xml_escape(h) + "</th>";
  s += "</tr></thead>\n<tbody>\n";
  for (const std::vector<std::string>& row : rows) {
    s += "<tr>";
    for (size_t i = 0; i < row.size(); ++i)
      s += (i > 0 && numbers_right && numeric(row[i]) ? "<td class=\"num\">" : "<td>") + xml_escape(row[i]) + "</td>";
    s += "</tr>\n";
  }
  return s + "</tbody>\n</table>\n";
}

std::string html_charts(const std::vector<std::string>& charts) {
  std::string s = "<div class=\"charts\">\n";
  for (const std::string& c : charts) s += c;
  return s + "</div>\n";
}

std::string format_number(double v, int decimals) {
  if (!std::isfinite(v)) return "–";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, std::abs(v));
  std::string digits = b, frac;
  if (const size_t dot = digits.find('.'); dot != std::string::npos) {
    frac = digits.substr(dot);
    digits.resize(dot);
  }
  std::string grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  const bool zero = digits.find_first_not_of('0') == std::string::npos && frac.find_first_not_of(".0") == std::string::npos;
  return (v < 0 && !zero ? "-" : "") + grouped + frac;
}

const std::vector<std::string>& phase_names() {
  static const std::vector<std::string> names = {"data", "forward", "backward", "optimizer",
                                                 "comm", "checkpoint", "eval",     "other"};
  return names;
}

std::string phase_color(const std::string& phase, size_t index) {
  static const std::map<std::string, std::string> colors = {
      {"data", "#9a8c6e"},   {"forward", "#3366cc"},    {"backward", "#19a979"}, {"optimizer", "#8e6cc8"},
      {"comm", "#e8743b"},   {"checkpoint", "#d64550"}, {"eval", "#2fa8c7"},     {"other", "#b4bac2"}};
  const auto it = colors.find(phase);
  return it != colors.end() ? it->second : palette_color(index);
}

}  // namespace dtrain
