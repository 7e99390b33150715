// The mixture-of-experts section of `dtrain report` (see report_sections.hpp): from the train records'
// tokens_per_expert, expert_imbalance and aux_loss (docs/watching.md), where router collapse shows.
#include <algorithm>
#include <cmath>

#include "metrics/html_page.hpp"
#include "metrics/report_sections.hpp"
#include "metrics/svg_chart.hpp"

namespace dtrain {

namespace {

using Records = std::vector<const Json*>;

// The run's train records that carry the routing load (a model with experts writes it in each).
Records moe_records(const RunData& run) {
  Records out;
  for (const Json* t : run.records_of("train"))
    if (json_member(*t, "tokens_per_expert").is_array()) out.push_back(t);
  return out;
}

// "layer 1" (the records' index among the sparse blocks), and its block where not every block is one.
std::string layer_label(const RunData& run, size_t layer) {
  const double every = json_number(run.config, "model.moe_every");
  std::string s = "layer " + std::to_string(layer);
  if (std::isfinite(every) && every > 1)
    s += " (block " + std::to_string((int64_t(layer) + 1) * int64_t(every) - 1) + ")";
  return s;
}

// [layer][expert]: token copies over the run, each record's per-step means times the steps it covers
// (those since the previous record).
std::vector<std::vector<double>> tokens_over_run(const Records& recs) {
  std::vector<std::vector<double>> sum;
  double prev = 0;
  for (const Json* t : recs) {
    const double step = json_number(*t, "step");
    const double steps = std::isfinite(step) && step > prev ? step - prev : 1;
    if (std::isfinite(step)) prev = std::max(prev, step);
    const Json& layers = json_member(*t, "tokens_per_expert");
    if (sum.size() < layers.size()) sum.resize(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      if (!layers[l].is_array()) continue;
      if (sum[l].size() < layers[l].size()) sum[l].resize(layers[l].size(), 0.0);
      for (size_t e = 0; e < layers[l].size(); ++e)
        if (layers[l][e].is_number()) sum[l][e] += steps * layers[l][e].get<double>();
    }
  }
  return sum;
}

// The i-th of n colours (experts, layers): the palette's up to its 10, hues around the wheel past them.
std::string spread_color(size_t i, size_t n) {
  if (n <= 10) return palette_color(i);
  const int hue = int(360.0 * double(i) / double(n));
  return "hsl(" + std::to_string(hue) + ", 62%, " + (i % 2 ? "40%" : "58%") + ")";
}

// A bar per layer (and run), a segment per expert: its share of the layer's tokens over the run.
std::string load_bars(const std::vector<RunData>& runs, const std::vector<Records>& recs, size_t& experts) {
  StackedBars bars;
  bars.title = "Expert load by layer";
  bars.value_label = "share of the layer's token copies over the run (%)";
  experts = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto tokens = tokens_over_run(recs[i]);
    for (size_t l = 0; l < tokens.size(); ++l) {
      double total = 0;
      for (double t : tokens[l]) total += t;
      std::vector<double> shares;
      for (double t : tokens[l]) shares.push_back(total > 0 ? 100 * t / total : 0.0);
      bars.bars.push_back((runs.size() > 1 ? runs[i].label + ": " : std::string()) + layer_label(runs[i], l));
      bars.values.push_back(shares);
      experts = std::max(experts, tokens[l].size());
    }
  }
  for (size_t e = 0; e < experts; ++e) {
    bars.parts.push_back("expert " + std::to_string(e));
    bars.colors.push_back(spread_color(e, experts));
  }
  return stacked_bars_svg(bars);
}

// Each layer's busiest expert over the mean (expert_imbalance) over steps; a colour per layer, a
// line style per run.
std::string imbalance_chart(const std::vector<RunData>& runs, const std::vector<Records>& recs) {
  LineChart c = line_chart("Busiest expert over the mean", "step", "busiest expert's tokens ÷ the mean");
  size_t layers = 0;
  for (const Records& rs : recs)
    for (const Json* t : rs)
      if (const Json& im = json_member(*t, "expert_imbalance"); im.is_array()) layers = std::max(layers, im.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    for (size_t l = 0; l < layers; ++l) {
      Series s;
      s.color = spread_color(l, layers);
      for (const Json* t : recs[i]) {
        const Json& im = json_member(*t, "expert_imbalance");
        s.x.push_back(json_number(*t, "step"));
        s.y.push_back(im.is_array() && l < im.size() && im[l].is_number() ? im[l].get<double>() : NAN);
      }
      add_series(c, std::move(s), runs, i, layer_label(runs[i], l));
    }
  }
  return has_points(c) ? line_chart_svg(c) : "";
}

// aux_loss over steps; "" when it is 0 throughout (model.aux_loss_coef = 0).
std::string aux_loss_chart(const std::vector<RunData>& runs, const std::vector<Records>& recs) {
  LineChart c = line_chart("Aux loss (load balancing)", "step", "aux loss (added to the objective)");
  bool nonzero = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    Series s = series_of(recs[i], "step", "aux_loss");
    for (double y : s.y) nonzero = nonzero || (std::isfinite(y) && y != 0);
    add_series(c, std::move(s), runs, i, "aux loss");
  }
  if (!has_points(c) || !nonzero) return "";
  choose_scale(c);
  return line_chart_svg(c);
}

}  // namespace

std::string report_experts(const std::vector<RunData>& runs) {
  std::vector<Records> recs;
  bool any = false;
  for (const RunData& r : runs) {
    recs.push_back(moe_records(r));
    any = any || !recs.back().empty();
  }
  if (!any) return "";
  size_t experts = 0;
  std::vector<std::string> charts = {load_bars(runs, recs, experts)};
  if (std::string im = imbalance_chart(runs, recs); !im.empty()) charts.push_back(im);
  std::string aux = aux_loss_chart(runs, recs);
  if (!aux.empty()) charts.push_back(aux);
  std::string notes = html_note(
      "Expert load: each expert's share of its layer's token copies (a token counts once per expert it goes "
      "to), over the run. An even load is " +
      format_number(experts ? 100.0 / double(experts) : 0, 1) +
      "% each; a router collapsing onto few experts shows as few wide segments, and as a busiest expert far "
      "above 1 times the mean (experts ÷ top_k: every token on the same experts).");
  notes += aux.empty() ? html_note("The aux loss is 0 throughout (model.aux_loss_coef = 0): no chart.")
                       : html_note(
                             "Aux loss: the balance loss times model.aux_loss_coef, per sample; about the "
                             "coefficient when the load and the router's scores are even.");
  return html_section("experts", "Experts", html_charts(charts) + notes);
}

}  // namespace dtrain
