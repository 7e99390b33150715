// The chart sections of `dtrain report` (see report_sections.hpp): losses, throughput, step phases,
// communication and resources, read from metrics.jsonl and summary.json as docs/watching.md defines
// them; and the line-chart helpers every chart section shares.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "metrics/html_page.hpp"
#include "metrics/report_sections.hpp"
#include "metrics/svg_chart.hpp"

namespace dtrain {

LineChart line_chart(const std::string& title, const std::string& x_label, const std::string& y_label) {
  LineChart c;
  c.title = title;
  c.x_label = x_label;
  c.y_label = y_label;
  return c;
}

bool has_points(const LineChart& c) {
  for (const Series& s : c.series)
    for (size_t i = 0; i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) return true;
  return false;
}

Series series_of(const std::vector<const Json*>& recs, const std::string& x_field, const std::string& field,
                 double scale) {
  Series s;
  for (const Json* r : recs) {
    s.x.push_back(json_number(*r, x_field));
    s.y.push_back(json_number(*r, field) * scale);
  }
  return s;
}

void add_series(LineChart& c, Series s, const std::vector<RunData>& runs, size_t run, const std::string& what) {
  bool any = false;
  for (size_t i = 0; i < s.y.size(); ++i) any = any || (std::isfinite(s.x[i]) && std::isfinite(s.y[i]));
  if (!any) return;
  s.name = series_name(runs, run, what);
  if (s.color.empty()) s.color = palette_color(c.series.size());
  s.dash = run_dash(run);
  c.series.push_back(std::move(s));
}

void choose_scale(LineChart& c) {
  double lo = INFINITY, hi = 0;
  for (const Series& s : c.series)
    for (double y : s.y)
      if (std::isfinite(y)) lo = std::min(lo, y), hi = std::max(hi, y);
  if (lo > 0 && hi / lo >= 10) c.y_scale = YScale::log;
}

namespace {

constexpr const char* kStepColor = "#2b2f36";  // a step's whole time among its phases

// The phases the runs name (summary's and the records'), in docs/watching.md's order, others after.
std::vector<std::string> phases_of(const std::vector<RunData>& runs) {
  std::vector<std::string> out = phase_names();
  auto note = [&](const Json& obj) {
    if (!obj.is_object()) return;
    for (const auto& [k, v] : obj.items())
      if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  };
  for (const RunData& r : runs) {
    note(json_member(r.summary, "step_time.phases"));
    for (const Json* t : r.records_of("train")) note(json_member(*t, "phases"));
  }
  return out;
}

// Seconds since the start shown in a unit that keeps the numbers short.
struct TimeUnit {
  double divisor = 1;
  std::string label = "time since the start (s)";
};
TimeUnit time_unit(double max_seconds) {
  if (max_seconds > 3 * 3600) return {3600, "time since the start (h)"};
  if (max_seconds > 600) return {60, "time since the start (min)"};
  return {};
}

}  // namespace

std::string series_name(const std::vector<RunData>& runs, size_t run, const std::string& what) {
  if (runs.size() < 2) return what;
  return what.empty() ? runs[run].label : runs[run].label + ": " + what;
}

std::string run_dash(size_t run) {
  static const char* dashes[] = {"", "7 4", "2 3", "9 3 2 3"};
  return dashes[run % 4];
}

bool is_classifier(const RunData& run) {
  for (const Json& r : run.records)
    if (r.contains("accuracy") || r.contains("val_accuracy")) return true;
  return false;
}

std::string report_loss(const std::vector<RunData>& runs) {
  LineChart loss = line_chart("Loss", "step", "loss");
  LineChart lr = line_chart("Learning rate", "step", "learning rate");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    add_series(loss, series_of(r.records_of("train"), "step", "loss"), runs, i, "train (step)");
    Series epoch = series_of(r.records_of("epoch"), "step", "train_loss");
    epoch.markers = true;
    add_series(loss, epoch, runs, i, "train (epoch)");
    std::map<double, double> val;  // by step: `val` records and the epochs' validation
    for (const Json* v : r.records_of("val")) val.emplace(json_number(*v, "step"), json_number(*v, "loss"));
    for (const Json* e : r.records_of("epoch")) val.emplace(json_number(*e, "step"), json_number(*e, "val_loss"));
    Series vs;
    vs.markers = true;
    for (const auto& [step, l] : val) vs.x.push_back(step), vs.y.push_back(l);
    add_series(loss, vs, runs, i, "validation");
    Series test = series_of(r.records_of("test"), "step", "loss");
    test.markers = true;
    add_series(loss, test, runs, i, "test");
    add_series(lr, series_of(r.records_of("train"), "step", "lr"), runs, i, "learning rate");
  }
  if (!has_points(loss)) return html_section("loss", "Loss", html_note("No train, epoch, val or test records yet."));
  choose_scale(loss);
  std::vector<std::string> charts = {line_chart_svg(loss)};
  if (has_points(lr)) charts.push_back(line_chart_svg(lr));
  return html_section("loss", "Loss",
                      html_charts(charts) + html_note("Train (step): the mean over the steps since the previous train "
                                                      "record; train (epoch): the epoch's mean, averaged over ranks."));
}

std::string report_throughput(const std::vector<RunData>& runs) {
  const auto classifiers = std::count_if(runs.begin(), runs.end(), [](const RunData& r) { return is_classifier(r); });
  const std::string unit = classifiers == 0                   ? "tokens/s"
                           : classifiers == int64_t(runs.size()) ? "samples/s"
                                                               : "tokens/s (language models), samples/s (classifiers)";
  LineChart speed = line_chart("Throughput", "step", unit + " (all ranks)");
  speed.y_from_zero = true;
  LineChart mfu = line_chart("Model FLOPs utilisation", "step", "MFU (% of peak)");
  mfu.y_from_zero = true;
  LineChart tflops = line_chart("Compute per rank", "step", "TFLOP/s per rank");
  tflops.y_from_zero = true;
  bool tflops_needed = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto train = runs[i].records_of("train");
    const bool classifier = is_classifier(runs[i]);  // each series says its own unit
    add_series(speed, series_of(train, "step", classifier ? "samples_per_s" : "tokens_per_s"), runs, i,
        classifier ? "samples/s" : "tokens/s");
    const size_t had = mfu.series.size();
    add_series(mfu, series_of(train, "step", "mfu", 100.0), runs, i, "MFU");
    add_series(tflops, series_of(train, "step", "tflops_per_rank"), runs, i, "TFLOP/s per rank");
    tflops_needed = tflops_needed || mfu.series.size() == had;  // this run has no MFU
  }
  std::vector<std::string> charts;
  std::string notes;
  if (has_points(speed)) charts.push_back(line_chart_svg(speed));
  else notes += html_note("No throughput in the train records yet.");
  if (has_points(mfu)) charts.push_back(line_chart_svg(mfu));
  if (has_points(tflops) && tflops_needed) {
    charts.push_back(line_chart_svg(tflops));
    notes += html_note("MFU is null where the device's peak is unknown (a CPU): set train.peak_tflops to have it; "
                       "TFLOP/s per rank are shown instead.");
  }
  if (!has_points(mfu) && !has_points(tflops)) notes += html_note("No MFU or TFLOP/s figures in the train records.");
  return html_section("throughput", "Throughput", html_charts(charts) + notes);
}

namespace {

// summary.json's step_time: a bar per rank of every run, and a table per run.
std::string step_time_by_rank(const std::vector<RunData>& runs, const std::vector<std::string>& phases) {
  StackedBars bars;
  bars.title = "Mean time per step and phase";
  bars.value_label = "milliseconds per step (after warm-up)";
  bars.parts = phases;
  for (size_t p = 0; p < phases.size(); ++p) bars.colors.push_back(phase_color(phases[p], p));
  std::string tables, missing;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    const Json& st = json_member(r.summary, "step_time");
    if (!st.is_object()) {
      missing += html_note(series_name(runs, i, "") + (runs.size() > 1 ? ": " : "") +
                           (r.summary.is_null() ? "no summary.json (the run has not finished)"
                                                : "summary.json has no step_time (a run from before phase timing)"));
      continue;
    }
    std::vector<Json> by_rank;
    if (const Json& b = json_member(st, "by_rank"); b.is_array())
      for (const Json& one : b) by_rank.push_back(json_member(one, "phases"));
    if (by_rank.empty()) {  // the phases' means stand for the one rank
      Json one = Json::object();
      if (const Json& ph = json_member(st, "phases"); ph.is_object())
        for (const auto& [k, v] : ph.items()) one[k] = json_number(v, "mean_s");
      by_rank.push_back(one);
    }
    for (size_t rank = 0; rank < by_rank.size(); ++rank) {
      bars.bars.push_back(series_name(runs, i, "") + (runs.size() > 1 ? " " : "") + "rank " + std::to_string(rank));
      std::vector<double> ms;
      for (const std::string& p : phases) ms.push_back(1e3 * json_number(by_rank[rank], p));
      bars.values.push_back(ms);
    }
    std::vector<std::vector<std::string>> rows;
    for (const std::string& p : phases) {
      const Json& ph = json_member(json_member(st, "phases"), p);
      if (!ph.is_object()) continue;
      const double slowest = json_number(ph, "slowest_rank");
      rows.push_back({p, format_number(1e3 * json_number(ph, "mean_s"), 2), format_number(100 * json_number(ph, "share"), 1) + "%",
                      std::isfinite(slowest) ? std::to_string(int64_t(slowest)) : "–",
                      format_number(1e3 * json_number(ph, "slowest_mean_s"), 2)});
    }
    rows.push_back({"step", format_number(1e3 * json_number(st, "mean_s"), 2), "100%", "", ""});
    const double warm = json_number(st, "warmup_steps"), steps = json_number(st, "steps");
    tables += html_table({"phase", "mean (ms)", "share", "slowest rank", "its mean (ms)"}, rows,
                         (runs.size() > 1 ? r.label + ": " : std::string()) + format_number(steps, 0) +
                             " steps after " + format_number(warm, 0) + " of warm-up");
  }
  std::string html;
  if (!bars.bars.empty()) html += html_charts({stacked_bars_svg(bars)}) + "<div class=\"tables\">\n" + tables + "</div>\n";
  return html + missing;
}

// Rank 0's phases over the run (from the train records), and the step they add up to.
std::string phases_over_steps(const std::vector<RunData>& runs, const std::vector<std::string>& phases) {
  std::string html;
  LineChart over = line_chart("Phases over the run (rank 0)", "step", "milliseconds per step");
  over.y_from_zero = true;
  std::set<std::string> used;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto train = runs[i].records_of("train");
    Series step = series_of(train, "step", "step_seconds", 1e3);
    step.color = kStepColor;
    add_series(over, step, runs, i, "step");
    for (size_t p = 0; p < phases.size(); ++p) {
      Series s = series_of(train, "step", "phases." + phases[p], 1e3);
      if (std::none_of(s.y.begin(), s.y.end(), [](double y) { return std::isfinite(y) && y > 0; })) continue;
      s.color = phase_color(phases[p], p);
      used.insert(phases[p]);
      add_series(over, s, runs, i, phases[p]);
    }
  }
  if (has_points(over)) {
    std::string left_out;
    for (const std::string& p : phases)
      if (!used.count(p)) left_out += (left_out.empty() ? "" : ", ") + p;
    html += html_charts({line_chart_svg(over)});
    if (!left_out.empty()) html += html_note("Phases at 0 throughout are left out: " + left_out + ".");
  } else {
    html += html_note("No phases in the train records (a run from before phase timing).");
  }
  return html;
}

}  // namespace

std::string report_phases(const std::vector<RunData>& runs) {
  const std::vector<std::string> phases = phases_of(runs);
  return html_section("phases", "Step time by phase", step_time_by_rank(runs, phases) + phases_over_steps(runs, phases));
}

std::string report_communication(const std::vector<RunData>& runs) {
  LineChart c = line_chart("Communication share of the step", "step", "comm phase (% of the step)");
  c.y_from_zero = true;
  std::string notes;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto train = runs[i].records_of("train");
    size_t ranks = 0;
    for (const Json* t : train)
      if (const Json& ph = json_member(*t, "phases_by_rank"); ph.is_array()) ranks = std::max(ranks, ph.size());
    if (ranks == 0) {
      Series s;
      for (const Json* t : train) {
        s.x.push_back(json_number(*t, "step"));
        s.y.push_back(100 * json_number(*t, "phases.comm") / json_number(*t, "step_seconds"));
      }
      add_series(c, s, runs, i, "rank 0");
    }
    for (size_t rank = 0; rank < ranks; ++rank) {
      Series s;
      for (const Json* t : train) {
        const Json& ph = json_member(*t, "phases_by_rank");
        const Json& st = json_member(*t, "step_seconds_by_rank");
        const bool have = ph.is_array() && st.is_array() && rank < ph.size() && rank < st.size() && st[rank].is_number();
        s.x.push_back(json_number(*t, "step"));
        s.y.push_back(have ? 100 * json_number(ph[rank], "comm") / st[rank].get<double>() : NAN);
      }
      add_series(c, s, runs, i, "rank " + std::to_string(rank));
    }
    const double share = json_number(runs[i].summary, "step_time.phases.comm.share");
    if (std::isfinite(share))
      notes += html_note((runs.size() > 1 ? runs[i].label + ": c" : "C") + std::string("ommunication took ") +
                         format_number(100 * share, 1) + "% of the mean step after warm-up; its slowest rank was " +
                         json_text(runs[i].summary, "step_time.phases.comm.slowest_rank") + ".");
  }
  if (!has_points(c)) return html_section("communication", "Communication", html_note("No comm phase in the train records."));
  return html_section("communication", "Communication",
                      html_charts({line_chart_svg(c)}) + notes +
                          html_note("The comm phase is time waiting on communication that the compute did not hide "
                                    "(a collective's wait, a pipeline receive)."));
}

std::string report_resources(const std::vector<RunData>& runs) {
  double max_t = 0;
  for (const RunData& r : runs)
    for (const Json* s : r.records_of("resource"))
      if (const double t = json_number(*s, "t"); std::isfinite(t)) max_t = std::max(max_t, t);
  const TimeUnit tu = time_unit(max_t);
  struct Field {
    const char* key;
    const char* title;
    const char* y_label;
  };
  const Field fields[] = {{"rss_mb", "Memory per rank", "resident memory (MB)"},
                          {"cpu_percent", "CPU per rank", "CPU (%, 100 = one core)"},
                          {"gpu_mem_mb", "GPU memory per rank", "GPU memory (MB)"},
                          {"gpu_util_percent", "GPU utilisation per rank", "GPU busy (%)"}};
  std::vector<std::string> charts;
  std::string notes;
  for (const Field& f : fields) {
    LineChart c = line_chart(f.title, tu.label, f.y_label);
    c.y_from_zero = true;
    for (size_t i = 0; i < runs.size(); ++i) {
      std::map<int64_t, Series> by_rank;
      for (const Json* s : runs[i].records_of("resource")) {
        const double rank = json_number(*s, "rank");
        if (!std::isfinite(rank)) continue;
        Series& se = by_rank[int64_t(rank)];
        se.x.push_back(json_number(*s, "t") / tu.divisor);
        se.y.push_back(json_number(*s, f.key));
      }
      for (auto& [rank, se] : by_rank) add_series(c, std::move(se), runs, i, "rank " + std::to_string(rank));
    }
    if (has_points(c)) charts.push_back(line_chart_svg(c));
  }
  std::string tables;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].records_of("resource").empty())
      notes += html_note((runs.size() > 1 ? runs[i].label + ": n" : "N") +
                         std::string("o resource records (train.sample_every_s = 0, or a run from before resource "
                                     "sampling): no resource charts."));
    const Json& max = json_member(runs[i].summary, "resources.max");
    if (!max.is_object()) continue;
    std::vector<std::vector<std::string>> rows;
    for (const auto& [field, v] : max.items())
      rows.push_back({field, format_number(json_number(v, "value"), 1), json_text(v, "rank")});
    tables += html_table({"field", "largest", "rank"}, rows,
                         (runs.size() > 1 ? runs[i].label + ": " : std::string()) + "largest sample of " +
                             format_number(json_number(runs[i].summary, "resources.samples"), 0));
  }
  std::string html = charts.empty() ? "" : html_charts(charts);
  html += notes;
  if (!tables.empty()) html += "<div class=\"tables\">\n" + tables + "</div>\n";
  return html_section("resources", "Resources", html);
}

}  // namespace dtrain
