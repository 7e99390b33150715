// The sections of `dtrain report`, each one <section> of HTML about the runs shown: one run, or
// several overlaid (series, bars and table columns then carry each run's label).
#pragma once
#include <string>
#include <vector>

#include "metrics/run_data.hpp"

namespace dtrain {

// Charts (report_charts.cpp)
std::string report_loss(const std::vector<RunData>& runs);           // losses and the learning rate over steps
std::string report_throughput(const std::vector<RunData>& runs);     // tokens (samples) per second, MFU or TFLOP/s
std::string report_phases(const std::vector<RunData>& runs);         // summary's step_time per rank, phases over steps
std::string report_communication(const std::vector<RunData>& runs);  // the comm phase's share of each step
std::string report_resources(const std::vector<RunData>& runs);      // memory, CPU (and GPU) per rank over time

// Tables (report_tables.cpp)
std::string report_overview(const std::vector<RunData>& runs);     // what each run is
std::string report_results(const std::vector<RunData>& runs);      // test, validation, speed, memory
std::string report_checkpoints(const std::vector<RunData>& runs);  // saves: stalls, writes, sizes
std::string report_config(const std::vector<RunData>& runs);       // config.json as written

// Series of run `run` of `runs` named `what` (several runs: "label: what"; `what` empty: the label).
std::string series_name(const std::vector<RunData>& runs, size_t run, const std::string& what);
// Run `run`'s line style in overlays: solid, dashed, dotted, dash-dot, then again.
std::string run_dash(size_t run);
// Whether the run trained a classifier (its records carry accuracy, not perplexity).
bool is_classifier(const RunData& run);

}  // namespace dtrain
