// scaling.csv and scaling.html of a scaling study (see scaling_report.hpp).
#include "metrics/scaling_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.hpp"
#include "metrics/html_page.hpp"
#include "metrics/run_data.hpp"
#include "metrics/svg_chart.hpp"

namespace dtrain {

namespace {

// Every phase the points name, in docs/watching.md's order, others after.
std::vector<std::string> phases_of(const ScalingStudy& s) {
  std::vector<std::string> known = phase_names(), out;
  for (const std::string& p : known)
    for (const ScalingPoint& pt : s.points)
      if (std::any_of(pt.phases.begin(), pt.phases.end(), [&](const auto& ph) { return ph.first == p; })) {
        out.push_back(p);
        break;
      }
  for (const ScalingPoint& pt : s.points)
    for (const auto& [name, _] : pt.phases)
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  return out;
}

double phase_of(const ScalingPoint& pt, const std::string& name) {
  for (const auto& [n, v] : pt.phases)
    if (n == name) return v;
  return NAN;
}

std::string csv_number(double v) {
  if (!std::isfinite(v)) return "";
  char b[40];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

double required(const Json& summary, const std::string& key, const std::string& source) {
  const double v = json_number(summary, key);
  require(std::isfinite(v), source + " has no " + key + ": the run was made by a dtrain that does not time its "
                            "steps; rebuild dtrain (docs/watching.md) and run the study again");
  return v;
}

}  // namespace

ScalingPoint scaling_point(int workers, int64_t per_rank_batch, int64_t global_batch, const Json& summary,
                           const std::string& source) {
  ScalingPoint p;
  p.workers = workers;
  p.per_rank_batch = per_rank_batch;
  p.global_batch = global_batch;
  p.tokens_per_s = required(summary, "steady_tokens_per_s", source);
  p.step_seconds = required(summary, "step_time.mean_s", source);
  const Json& phases = json_member(summary, "step_time.phases");
  require(phases.is_object(), source + " has no step_time.phases: the run was made by a dtrain that does not time "
                              "its steps; rebuild dtrain (docs/watching.md) and run the study again");
  for (const auto& [name, v] : phases.items()) p.phases.push_back({name, json_number(v, "mean_s")});
  return p;
}

std::vector<double> scaling_speedups(const ScalingStudy& study) {
  std::vector<double> out;
  if (study.points.empty()) return out;
  const ScalingPoint& base = study.points.front();
  for (const ScalingPoint& p : study.points)
    out.push_back(base.tokens_per_s > 0 ? p.tokens_per_s / base.tokens_per_s * base.workers : NAN);
  return out;
}

std::string scaling_csv(const ScalingStudy& study) {
  const std::vector<std::string> phases = phases_of(study);
  const std::vector<double> speedup = scaling_speedups(study);
  std::string s = "workers,per_rank_batch,global_batch,tokens_per_s,step_seconds,speedup,efficiency";
  for (const std::string& p : phases) s += "," + p + "_s";
  s += "\n";
  for (size_t i = 0; i < study.points.size(); ++i) {
    const ScalingPoint& p = study.points[i];
    s += std::to_string(p.workers) + "," + std::to_string(p.per_rank_batch) + "," + std::to_string(p.global_batch) +
         "," + csv_number(p.tokens_per_s) + "," + csv_number(p.step_seconds) + "," + csv_number(speedup[i]) + "," +
         csv_number(speedup[i] / p.workers);
    for (const std::string& ph : phases) s += "," + csv_number(phase_of(p, ph));
    s += "\n";
  }
  return s;
}

namespace {

// The table of points: a row per worker count.
std::vector<std::vector<std::string>> point_rows(const ScalingStudy& study, const std::vector<double>& speedup) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < study.points.size(); ++i) {
    const ScalingPoint& p = study.points[i];
    rows.push_back({std::to_string(p.workers), format_number(double(p.per_rank_batch), 0),
                    format_number(double(p.global_batch), 0), format_number(p.tokens_per_s, 0),
                    format_number(1e3 * p.step_seconds, 2), format_number(speedup[i], 2),
                    format_number(100 * speedup[i] / p.workers, 1) + "%", p.run_dir});
  }
  return rows;
}

// The charts over the worker counts: speedup (measured and ideal), efficiency (measured and 100%)
// and throughput. Workers as ticks; over a factor of 4 or more, on log axes (speedup's ideal then
// a straight line).
std::string worker_charts(const ScalingStudy& study, const std::vector<double>& speedup, int base) {
  Series measured, ideal, eff, full, tps;
  for (size_t i = 0; i < study.points.size(); ++i) {
    const ScalingPoint& p = study.points[i];
    measured.x.push_back(p.workers), measured.y.push_back(speedup[i]);
    ideal.x.push_back(p.workers), ideal.y.push_back(p.workers);
    eff.x.push_back(p.workers), eff.y.push_back(100 * speedup[i] / p.workers);
    full.x.push_back(p.workers), full.y.push_back(100);
    tps.x.push_back(p.workers), tps.y.push_back(p.tokens_per_s);
  }
  measured.name = "measured";
  measured.markers = eff.markers = tps.markers = true;
  ideal.name = "ideal (N)";
  full.name = "100%";
  eff.name = "measured";
  tps.name = "tokens/s";
  ideal.color = full.color = "#8a9099";
  ideal.dash = full.dash = "6 4";
  const bool log_x = !study.points.empty() && study.points.back().workers >= 4 * base;
  // a chart over the worker counts: its title, y label, series (the last one measured, in `color`)
  auto workers_chart = [&](const char* title, const char* y_label, std::vector<Series> series, int color) {
    LineChart c;
    c.x_log = log_x;
    for (const ScalingPoint& p : study.points) c.x_ticks.push_back(p.workers);
    c.title = title;
    c.x_label = "workers (N)";
    c.y_label = y_label;
    c.y_from_zero = true;
    c.series = std::move(series);
    c.series.back().color = palette_color(color);
    return c;
  };
  LineChart sp = workers_chart("Speedup", "speedup", {ideal, measured}, 0);
  if (log_x) sp.y_scale = YScale::log;
  sp.y_from_zero = !log_x;
  const LineChart ef = workers_chart("Efficiency", "efficiency (% of ideal)", {full, eff}, 2);
  const LineChart th = workers_chart("Throughput", "tokens/s (all ranks, steady)", {tps}, 1);
  return html_charts({line_chart_svg(sp), line_chart_svg(ef), line_chart_svg(th)});
}

// Each point's mean step time split by phase, a bar per worker count.
StackedBars phase_bars(const ScalingStudy& study, const std::vector<std::string>& phases) {
  StackedBars bars;
  bars.title = "Mean time per step and phase (rank 0)";
  bars.value_label = "milliseconds per step (after warm-up)";
  bars.parts = phases;
  for (size_t p = 0; p < phases.size(); ++p) bars.colors.push_back(phase_color(phases[p], p));
  for (const ScalingPoint& p : study.points) {
    bars.bars.push_back(std::to_string(p.workers) + (p.workers == 1 ? " worker" : " workers"));
    std::vector<double> ms;
    for (const std::string& ph : phases) ms.push_back(1e3 * phase_of(p, ph));
    bars.values.push_back(ms);
  }
  return bars;
}

// What the study's mode means, and how speedup and efficiency are computed from the base count.
std::string how_measured(bool strong, int base) {
  std::string how = strong ? "Strong scaling: the global batch stays the same and each of N workers takes 1/N of it, "
                             "so ideal throughput grows N times as the work per worker shrinks."
                           : "Weak scaling: each worker keeps its batch, so the global batch grows N times; ideal "
                             "throughput grows N times at a constant step time.";
  how += " Speedup = tokens/s at N ÷ tokens/s at " + std::to_string(base) +
         (base == 1 ? "" : " × " + std::to_string(base)) + "; efficiency = speedup ÷ N.";
  if (base != 1)
    how += " The smallest worker count is " + std::to_string(base) + ", not 1: speedup is relative to it times " +
           std::to_string(base) + ", so " + std::to_string(base) + " workers count as perfectly efficient.";
  return how;
}

}  // namespace

std::string scaling_html(const ScalingStudy& study) {
  const std::vector<double> speedup = scaling_speedups(study);
  const std::vector<std::string> phases = phases_of(study);
  const bool strong = study.mode == "strong";
  const int base = study.points.empty() ? 1 : study.points.front().workers;

  std::string header = "<h1>dtrain scaling study</h1>\n<p>" + xml_escape(study.mode) + " scaling, " +
                       std::to_string(study.points.size()) + (study.points.size() == 1 ? " point" : " points") +
                       "</p>\n";
  std::vector<std::vector<std::string>> settings;
  for (const auto& [k, v] : study.settings) settings.push_back({k, v});

  std::string body = html_section(
      "points", "Points",
      html_table({"workers", "batch per rank", "global batch", "tokens/s", "step (ms)", "speedup", "efficiency",
                  "run dir"},
                 point_rows(study, speedup)) +
          html_note(how_measured(strong, base)) +
          (settings.empty() ? std::string()
                            : "<h3>What was run</h3>\n" + html_table({"setting", "value"}, settings, "", false)));
  body += html_section("scaling", "Speedup and efficiency", worker_charts(study, speedup, base));
  body += html_section("phases", "Step time by phase",
                       html_charts({stacked_bars_svg(phase_bars(study, phases))}) +
                           html_note("Phases as docs/watching.md defines them; comm is communication the compute "
                                     "did not hide."));
  return html_document("dtrain scaling study (" + study.mode + ")", header, body);
}

}  // namespace dtrain
