// Charts as inline SVG for self-contained HTML reports: line charts (several series, linear or log
// y) and stacked horizontal bars, each with round-number ticks, a legend, a title and axis labels.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// Text made safe inside XML and HTML elements and attribute values (& < > " '); control characters
// become spaces and bytes that are not UTF-8 characters (invalid sequences, surrogates, U+FFFE and
// other non-characters) become U+FFFD, so the page stays well-formed whatever a name holds.
std::string xml_escape(std::string_view text);

// The ticks of an axis: round values (1, 2 or 5 times a power of ten apart on a linear axis; powers
// of ten, with 2 and 5 times them over few decades, on a log axis), and the axis range [lo, hi]
// widened to the outer ticks.
struct Ticks {
  double lo = 0.0, hi = 1.0;
  double step = 1.0;  // linear: between ticks; log: 0
  std::vector<double> values;
};
// About `target` ticks covering [lo, hi]; lo == hi gets a range around it.
Ticks nice_ticks(double lo, double hi, int target = 5);
// Ticks of a log axis covering [lo, hi], both > 0.
Ticks log_ticks(double lo, double hi);
// A tick's label: the decimals the step needs; 1500 as "1.5k", 2e6 as "2M", tiny ones in e notation.
std::string tick_label(double value, double step);

// The i-th colour of the charts' palette (it repeats after its 10 colours).
const std::string& palette_color(size_t i);

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length; a NaN y (or one <= 0 on a log axis) is a gap in the line
  std::string color;         // "": the palette's colour for the series' index
  std::string dash;          // stroke-dasharray, e.g. "6 4"; "": solid
  bool markers = false;      // a dot on every point (sparse series: epochs, scaling points), while
                             // there is at most one per 6 pixels of the plot's width
};

enum class YScale { linear, log };

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  YScale y_scale = YScale::linear;
  bool y_from_zero = false;  // the y range includes 0 (throughput, shares, memory)
  bool x_log = false;             // a log x axis (x <= 0 is a gap)
  std::vector<double> x_ticks;    // ticks at exactly these x values (e.g. worker counts); empty: round ones
  int width = 640, height = 280;  // the plot keeps its size; legend rows past the first add height
};
// <svg class="chart">…</svg>: every series is a <g class="series"> holding its line (and dots); a
// chart without a finite point says "no data".
std::string line_chart_svg(const LineChart& chart);

struct StackedBars {
  std::string title, value_label;
  std::vector<std::string> bars;            // one label per bar, top to bottom
  std::vector<std::string> parts;           // the segments' names, left to right (the legend)
  std::vector<std::string> colors;          // per part; missing or "": the palette's
  std::vector<std::vector<double>> values;  // [bar][part], >= 0
  int width = 640;                          // the height follows the bars
};
// <svg class="chart">…</svg>: per bar a <g class="bar"> of one <rect class="segment"> per non-zero
// part, its total written after it.
std::string stacked_bars_svg(const StackedBars& chart);

}  // namespace dtrain
