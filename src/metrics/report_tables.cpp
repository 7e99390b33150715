// The table sections of `dtrain report` (see report_sections.hpp): what each run is, its results,
// its checkpoints and its config. Several runs: one column (or one table) per run.
#include <cmath>

#include "metrics/html_page.hpp"
#include "metrics/report_sections.hpp"
#include "metrics/svg_chart.hpp"

namespace dtrain {

namespace {

// The first finite of the numbers.
double first_of(std::initializer_list<double> values) {
  for (double v : values)
    if (std::isfinite(v)) return v;
  return NAN;
}

// The last record of a type, or a null JSON value.
const Json& last_of(const RunData& r, std::string_view type) {
  static const Json none;
  const auto recs = r.records_of(type);
  return recs.empty() ? none : *recs.back();
}

std::string text_or_dash(const std::string& s) { return s.empty() ? "–" : s; }

constexpr size_t kEnds = 10;  // a long checkpoint table shows this many first and last saves

// A table with a row per name and a column per run (one run: "value").
struct RunTable {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  explicit RunTable(const std::vector<RunData>& runs) {
    head.push_back("");
    for (const RunData& r : runs) head.push_back(runs.size() > 1 ? r.label : "value");
  }
  // Adds the row unless every value is "–" (keep: add it anyway).
  void row(const std::string& name, std::vector<std::string> values, bool keep = false) {
    bool any = keep;
    for (const std::string& v : values) any = any || v != "–";
    if (!any) return;
    values.insert(values.begin(), name);
    rows.push_back(std::move(values));
  }
};

// The values of f for every run.
template <class F>
std::vector<std::string> each(const std::vector<RunData>& runs, F f) {
  std::vector<std::string> out;
  for (const RunData& r : runs) out.push_back(f(r));
  return out;
}

}  // namespace

std::string report_overview(const std::vector<RunData>& runs) {
  RunTable t(runs);
  t.row("run dir", each(runs, [](const RunData& r) { return r.dir; }), true);
  t.row("model kind", each(runs, [](const RunData& r) {
          const std::string k = json_text(r.summary, "model_kind");
          return text_or_dash(k.empty() ? json_text(r.config, "model.kind") : k);
        }));
  t.row("parameters", each(runs, [](const RunData& r) { return format_number(json_number(r.summary, "parameters"), 0); }));
  t.row("world size (ranks)", each(runs, [](const RunData& r) {
          double ranks = json_number(r.summary, "world_size");
          if (!std::isfinite(ranks))  // a run still going: the ranks that sampled resources
            for (const Json* s : r.records_of("resource"))
              ranks = std::isfinite(ranks) ? std::max(ranks, json_number(*s, "rank") + 1) : json_number(*s, "rank") + 1;
          return format_number(ranks, 0);
        }));
  t.row("data-parallel ranks", each(runs, [](const RunData& r) { return format_number(json_number(r.summary, "dp_size"), 0); }));
  t.row("device", each(runs, [](const RunData& r) {
          const std::string d = json_text(r.summary, "device");
          return text_or_dash(d.empty() ? json_text(r.config, "train.device") : d);
        }));
  t.row("precision", each(runs, [](const RunData& r) {
          const std::string p = json_text(r.summary, "precision");
          return text_or_dash(p.empty() ? json_text(r.config, "train.precision") : p);
        }));
  t.row("threads per rank", each(runs, [](const RunData& r) { return format_number(json_number(r.summary, "threads"), 0); }));
  t.row("batch per rank", each(runs, [](const RunData& r) { return format_number(json_number(r.config, "train.batch_size"), 0); }));
  t.row("steps", each(runs, [](const RunData& r) {
          return format_number(first_of({json_number(r.summary, "steps"), json_number(last_of(r, "train"), "step")}), 0);
        }));
  std::string notes;
  for (const RunData& r : runs)
    if (r.summary.is_null())
      notes += html_note((runs.size() > 1 ? r.label + ": n" : "N") +
                         std::string("o summary.json: the run has not finished (or stopped early); what its records "
                                     "say so far is shown."));
  return html_section("overview", "Overview", html_table(t.head, t.rows) + notes);
}

std::string report_results(const std::vector<RunData>& runs) {
  RunTable t(runs);
  t.row("test loss", each(runs, [](const RunData& r) {
          return format_number(first_of({json_number(last_of(r, "test"), "loss"), json_number(r.summary, "test_loss")}), 4);
        }));
  t.row("test perplexity", each(runs, [](const RunData& r) {
          return format_number(first_of({json_number(last_of(r, "test"), "ppl"), json_number(r.summary, "test_ppl")}), 2);
        }));
  t.row("test accuracy", each(runs, [](const RunData& r) {
          const double a = first_of({json_number(last_of(r, "test"), "accuracy"), json_number(r.summary, "test_accuracy")});
          return std::isfinite(a) ? format_number(100 * a, 2) + "%" : "–";
        }));
  t.row("best validation loss", each(runs, [](const RunData& r) { return format_number(json_number(r.summary, "best_val_loss"), 4); }));
  t.row("last epoch's train loss", each(runs, [](const RunData& r) { return format_number(json_number(last_of(r, "epoch"), "train_loss"), 4); }));
  t.row("last epoch's validation loss", each(runs, [](const RunData& r) { return format_number(json_number(last_of(r, "epoch"), "val_loss"), 4); }));
  t.row("steady throughput (per s)", each(runs, [](const RunData& r) { return format_number(json_number(r.summary, "steady_tokens_per_s"), 0); }));
  t.row("throughput over the run (per s)", each(runs, [](const RunData& r) { return format_number(json_number(r.summary, "train_tokens_per_s"), 0); }));
  t.row("mean step (ms)", each(runs, [](const RunData& r) { return format_number(1e3 * json_number(r.summary, "step_time.mean_s"), 2); }));
  t.row("TFLOP/s per rank", each(runs, [](const RunData& r) { return format_number(json_number(r.summary, "tflops_per_rank"), 3); }));
  t.row("MFU", each(runs, [](const RunData& r) {
          const double m = json_number(r.summary, "mfu");
          return std::isfinite(m) ? format_number(100 * m, 1) + "%" : "–";
        }));
  t.row("peak memory (MB)", each(runs, [](const RunData& r) {
          const double mb = json_number(r.summary, "peak_rss_mb"), rank = json_number(r.summary, "peak_rss_rank");
          return format_number(mb, 0) + (std::isfinite(mb) && std::isfinite(rank) ? " (rank " + format_number(rank, 0) + ")" : "");
        }));
  t.row("peak device memory (MB)", each(runs, [](const RunData& r) {
          const double mb = json_number(r.summary, "peak_device_mb");
          return mb > 0 ? format_number(mb, 0) : "–";
        }));
  if (t.rows.empty()) return html_section("results", "Results", html_note("No test result or summary yet."));
  return html_section("results", "Results",
                      html_table(t.head, t.rows) +
                          html_note("Throughput counts rows of the loss (tokens; images for a classifier) of every "
                                    "rank; steady: after the warm-up steps."));
}

std::string report_checkpoints(const std::vector<RunData>& runs) {
  LineChart c;
  c.title = "Checkpoint stalls and writes";
  c.x_label = "step";
  c.y_label = "seconds";
  c.y_from_zero = true;
  size_t saves = 0;
  std::string tables, notes;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    std::vector<std::vector<std::string>> rows;
    Series stall, write;
    double stalled = 0, longest = 0, longest_step = NAN;
    const auto writes = r.records_of("checkpoint_written");
    for (const Json* k : r.records_of("checkpoint")) {
      const double step = json_number(*k, "step"), s = json_number(*k, "stall_seconds");
      double written = NAN;
      for (const Json* w : writes)
        if (json_number(*w, "step") == step) written = json_number(*w, "write_seconds");
      rows.push_back({format_number(step, 0), text_or_dash(json_text(*k, "format")), text_or_dash(json_text(*k, "async")),
                      format_number(json_number(*k, "bytes") / 1e6, 1), format_number(s, 3), format_number(written, 3)});
      stall.x.push_back(step), stall.y.push_back(s);
      write.x.push_back(step), write.y.push_back(written);
      if (std::isfinite(s)) stalled += s;
      if (s > longest) longest = s, longest_step = step;
    }
    saves += rows.size();
    if (rows.empty()) {
      notes += html_note((runs.size() > 1 ? r.label + ": n" : "N") + std::string("o checkpoint records."));
      continue;
    }
    const size_t count = rows.size();
    if (count > 2 * kEnds) {  // the first and the last saves; the chart shows them all
      rows.erase(rows.begin() + kEnds, rows.end() - kEnds);
      rows.insert(rows.begin() + kEnds, {"…", std::to_string(count - 2 * kEnds) + " more", "", "", "", ""});
    }
    tables += html_table({"step", "format", "async", "size (MB)", "stall (s)", "written in (s)"}, rows,
                         (runs.size() > 1 ? r.label + ": " : std::string()) + std::to_string(count) +
                             (count == 1 ? " checkpoint, " : " checkpoints, ") + format_number(stalled, 2) + " s stalled in all" +
                             (std::isfinite(longest_step) ? ", at most " + format_number(longest, 2) + " s (step " +
                                                                format_number(longest_step, 0) + ")"
                                                          : ""));
    stall.markers = write.markers = true;
    for (Series* s : {&stall, &write}) {
      bool any = false;
      for (double y : s->y) any = any || std::isfinite(y);
      if (!any) continue;
      s->name = series_name(runs, i, s == &stall ? "stall" : "write (async)");
      s->color = palette_color(c.series.size());
      s->dash = run_dash(i);
      c.series.push_back(*s);
    }
  }
  std::string html;
  if (saves >= 2) html += html_charts({line_chart_svg(c)});
  if (!tables.empty()) html += "<div class=\"tables\">\n" + tables + "</div>\n";
  html += notes;
  return html_section("checkpoints", "Checkpoints",
                      html + html_note("Stall: how long the training loop waited for a save (an async save: its copy "
                                       "only); written in: an async save's writing in the background."));
}

std::string report_config(const std::vector<RunData>& runs) {
  std::string html;
  for (const RunData& r : runs) {
    if (runs.size() > 1) html += "<h3>" + xml_escape(r.label) + "</h3>\n";
    html += r.config.is_null() ? html_note("No config.json in " + r.dir + ".")
                               : "<pre>" + xml_escape(r.config.dump(2)) + "</pre>\n";
  }
  return html_section("config", "Config", html);
}

}  // namespace dtrain
