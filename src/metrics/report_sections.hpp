// The sections of `dtrain report`, each one <section> of HTML about the runs shown: one run, or
// several overlaid (series, bars and table columns then carry each run's label).
#pragma once
#include <string>
#include <vector>

#include "metrics/run_data.hpp"
#include "metrics/svg_chart.hpp"

namespace dtrain {

// Charts (report_charts.cpp)
std::string report_loss(const std::vector<RunData>& runs);           // losses and the learning rate over steps
std::string report_throughput(const std::vector<RunData>& runs);     // tokens (samples) per second, MFU or TFLOP/s
std::string report_phases(const std::vector<RunData>& runs);         // summary's step_time per rank, phases over steps
std::string report_communication(const std::vector<RunData>& runs);  // the comm phase's share of each step
std::string report_resources(const std::vector<RunData>& runs);      // memory, CPU (and GPU) per rank over time
// Mixture-of-experts routing (report_experts.cpp): each expert's share of its layer's tokens, the
// busiest expert over the mean and the balance loss; "" when no train record carries them.
std::string report_experts(const std::vector<RunData>& runs);

// Tables (report_tables.cpp)
std::string report_overview(const std::vector<RunData>& runs);     // what each run is
std::string report_results(const std::vector<RunData>& runs);      // test, validation, speed, memory
std::string report_checkpoints(const std::vector<RunData>& runs);  // saves: stalls, writes, sizes
std::string report_config(const std::vector<RunData>& runs);       // config.json as written

// Line-chart helpers the chart sections share (report_charts.cpp)
LineChart line_chart(const std::string& title, const std::string& x_label, const std::string& y_label);
bool has_points(const LineChart& c);  // a finite point in some series
// A series of `field` (times `scale`) over `x_field` from records; NaN where a record lacks one.
Series series_of(const std::vector<const Json*>& recs, const std::string& x_field, const std::string& field,
                 double scale = 1.0);
// Adds s (named, styled as run `run`'s) when it has a finite point; colours go round the palette.
void add_series(LineChart& c, Series s, const std::vector<RunData>& runs, size_t run, const std::string& what);
// Log y when every value is positive and they span a factor of 10 or more.
void choose_scale(LineChart& c);

// Series of run `run` of `runs` named `what` (several runs: "label: what"; `what` empty: the label).
std::string series_name(const std::vector<RunData>& runs, size_t run, const std::string& what);
// Run `run`'s line style in overlays: solid, dashed, dotted, dash-dot, then again.
std::string run_dash(size_t run);
// Whether the run trained a classifier (its records carry accuracy, not perplexity).
bool is_classifier(const RunData& run);

}  // namespace dtrain
