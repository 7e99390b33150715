// Inline SVG line charts and stacked bars (see svg_chart.hpp). Text widths are estimated from the
// character count (no font metrics), which is what lays out the legend and the margins.
#include "metrics/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

namespace dtrain {

namespace {

constexpr double kCharWidth = 6.0;    // an 11px sans-serif character, roughly
constexpr double kTitleY = 18;        // the title's baseline
constexpr double kLegendTop = 26;     // the first legend row's top
constexpr double kLegendRow = 16;     // one legend row
constexpr double kBottom = 44;        // x tick labels and the x label under the plot
constexpr double kRight = 16;
constexpr const char* kAxis = "#8a9099";
constexpr const char* kGrid = "#e6e8eb";
constexpr const char* kText = "#2b2f36";
constexpr const char* kMuted = "#5c6370";

double text_width(std::string_view s) { return kCharWidth * double(s.size()); }

std::string num(double v) {  // a coordinate
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string fixed(double v, int decimals) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", std::clamp(decimals, 0, 9), v);
  std::string s = b;
  if (s == "-0" || s.find_first_not_of("-0.") == std::string::npos) return "0";
  return s;
}

// Decimals that tell apart values `unit` apart.
int decimals_for(double unit) { return std::max(0, int(-std::floor(std::log10(unit) + 1e-9))); }

// A value in three significant figures, without trailing zeros (a bar's total: "97", "0.0312").
std::string short_number(double v) {
  if (v == 0 || !std::isfinite(v)) return "0";
  std::string s = fixed(v, std::clamp(2 - int(std::floor(std::log10(std::abs(v)))), 0, 9));
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string svg_open(double w, double h, const std::string& title) {
  return "<svg class=\"chart\" width=\"" + num(w) + "\" height=\"" + num(h) + "\" viewBox=\"0 0 " + num(w) + " " +
         num(h) + "\" role=\"img\" aria-label=\"" + xml_escape(title) +
         "\" font-family=\"system-ui, sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"#ffffff\"/>\n<text x=\"12\" y=\"" + num(kTitleY) + "\" font-size=\"13\" font-weight=\"600\" fill=\"" +
         kText + "\">" + xml_escape(title) + "</text>\n";
}

std::string text(double x, double y, std::string_view s, const char* anchor = "start", const char* fill = kMuted,
                 const std::string& extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\" fill=\"" + fill + "\"" +
         extra + ">" + xml_escape(s) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const char* stroke, const std::string& extra = "") {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
         "\" stroke=\"" + stroke + "\"" + extra + "/>\n";
}

// A legend entry: its swatch is a short line (line charts) or a square (bars).
struct LegendItem {
  std::string name, color, dash;
  bool square = false;
};

double legend_item_width(const LegendItem& it) { return 22 + text_width(it.name) + 12; }

// Rows the legend takes between x0 and x1.
int legend_rows(const std::vector<LegendItem>& items, double x0, double x1) {
  int rows = items.empty() ? 0 : 1;
  double x = x0;
  for (const LegendItem& it : items) {
    const double w = legend_item_width(it);
    if (x > x0 && x + w > x1) {
      ++rows;
      x = x0;
    }
    x += w;
  }
  return rows;
}

std::string legend_svg(const std::vector<LegendItem>& items, double x0, double x1) {
  std::string s = "<g class=\"legend\">\n";
  double x = x0, y = kLegendTop;
  for (const LegendItem& it : items) {
    const double w = legend_item_width(it);
    if (x > x0 && x + w > x1) {
      x = x0;
      y += kLegendRow;
    }
    const double mid = y + kLegendRow / 2;
    if (it.square)
      s += "<rect x=\"" + num(x + 4) + "\" y=\"" + num(mid - 5) + "\" width=\"10\" height=\"10\" rx=\"2\" fill=\"" +
           it.color + "\"/>\n";
    else
      s += line(x, mid, x + 18, mid, it.color.c_str(),
                " stroke-width=\"2.5\"" + (it.dash.empty() ? std::string() : " stroke-dasharray=\"" + it.dash + "\""));
    s += text(x + 22, mid + 4, it.name, "start", kText);
    x += w;
  }
  return s + "</g>\n";
}

bool usable(double y, YScale scale) { return std::isfinite(y) && (scale == YScale::linear || y > 0); }

using Pixels = std::vector<std::pair<double, double>>;  // (x, y) on the chart; NaN x: a gap

// Each pixel column's first, lowest, highest and last point (a spike stays visible), gaps kept.
Pixels thinned(const Pixels& pts) {
  Pixels out;
  for (size_t i = 0; i < pts.size();) {
    if (std::isnan(pts[i].first)) {
      out.push_back(pts[i++]);
      continue;
    }
    const long column = std::lround(pts[i].first);
    size_t j = i, lo = i, hi = i;
    while (j < pts.size() && !std::isnan(pts[j].first) && std::lround(pts[j].first) == column) {
      if (pts[j].second > pts[lo].second) lo = j;  // pixels grow downwards
      if (pts[j].second < pts[hi].second) hi = j;
      ++j;
    }
    std::vector<size_t> keep = {i, lo, hi, j - 1};
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (size_t q : keep) out.push_back(pts[q]);
    i = j;
  }
  return out;
}

// A path's d attribute: a subpath between gaps; a point alone between gaps is a dot (its round cap).
std::string path_data(const Pixels& pts) {
  std::string d;
  bool pen = false;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (std::isnan(pts[i].first)) {
      pen = false;
      continue;
    }
    d += (pen ? " L" : (d.empty() ? "M" : " M")) + num(pts[i].first) + " " + num(pts[i].second);
    if (!pen && (i + 1 == pts.size() || std::isnan(pts[i + 1].first))) d += " l0 0";
    pen = true;
  }
  return d;
}

// The x axis: the given ticks (the range widened to the data), or round ones.
Ticks x_axis(const LineChart& c, double lo, double hi) {
  if (c.x_ticks.empty()) return c.x_log ? log_ticks(lo, hi) : nice_ticks(lo, hi, 6);
  Ticks t;
  for (double v : c.x_ticks)
    if (std::isfinite(v) && (!c.x_log || v > 0)) t.values.push_back(v);
  std::sort(t.values.begin(), t.values.end());
  if (t.values.empty()) return c.x_log ? log_ticks(lo, hi) : nice_ticks(lo, hi, 6);
  t.lo = std::min(lo, t.values.front());
  t.hi = std::max(hi, t.values.back());
  t.step = 0;  // each label on its own
  if (t.lo == t.hi) {
    t.lo = c.x_log ? t.lo / 2 : t.lo - 1;
    t.hi = c.x_log ? t.hi * 2 : t.hi + 1;
  }
  return t;
}

}  // namespace

namespace {

// The length of the well-formed UTF-8 sequence at text[i] whose code point XML allows and Unicode
// assigns as a character (no surrogate, no non-character such as U+FFFE or U+FDD0), or 0.
size_t good_utf8_at(std::string_view text, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = b(0);
  const size_t n = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 && lead <= 0xDF ? 2 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  uint32_t cp = lead & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;  // overlong, too big, surrogate
  if ((cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE) return 0;        // non-characters
  return n;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {  // bytes that are not UTF-8 text become U+FFFD
      const size_t n = good_utf8_at(text, i);
      if (n == 0) {
        out += "\uFFFD";
      } else {
        out.append(text.substr(i, n));
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // control characters other than tab and newline are not allowed in XML 1.0
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') out += ' ';
        else out += c;
    }
  }
  return out;
}

Ticks nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= lo == 0 ? 0 : pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  Ticks t;
  t.step = step;
  const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
  t.lo = first * step;
  t.hi = last * step;
  for (double i = first; i <= last + 0.5; i += 1) {
    const double v = i * step;
    t.values.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return t;
}

Ticks log_ticks(double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(lo)) lo = 1;
  if (!(hi >= lo) || !std::isfinite(hi)) hi = lo * 10;
  const int e0 = int(std::floor(std::log10(lo) + 1e-9)), e1 = int(std::ceil(std::log10(hi) - 1e-9));
  const int decades = std::max(1, e1 - e0);
  std::vector<double> candidates;  // ascending
  const int every = decades > 8 ? (decades + 7) / 8 : 1;
  for (int e = e0 - 1; e <= std::max(e1, e0 + 1); ++e) {
    const double p = std::pow(10.0, e);
    if (decades <= 2) {
      for (double m : {1.0, 2.0, 5.0}) candidates.push_back(m * p);
    } else if ((e - e0) % every == 0) {
      candidates.push_back(p);
    }
  }
  Ticks t;
  t.step = 0;
  t.lo = candidates.front();
  t.hi = candidates.back();
  for (double c : candidates) {
    if (c <= lo * (1 + 1e-9)) t.lo = c;
    if (c >= hi * (1 - 1e-9)) {
      t.hi = c;
      break;
    }
  }
  for (double c : candidates)
    if (c >= t.lo * (1 - 1e-9) && c <= t.hi * (1 + 1e-9)) t.values.push_back(c);
  return t;
}

std::string tick_label(double value, double step) {
  const double a = std::abs(value);
  if (a == 0 || (step > 0 && a < step * 1e-9)) return "0";
  const double unit = step > 0 ? step : a;  // a log axis: each tick on its own
  if (a >= 1e6) return fixed(value / 1e6, decimals_for(unit / 1e6)) + "M";
  if (a >= 1e4 || (a >= 1000 && unit >= 100)) return fixed(value / 1e3, decimals_for(unit / 1e3)) + "k";
  if (unit < 1e-3) {  // e notation, with the digits the step tells apart
    char b[32];
    const int digits = std::clamp(int(std::floor(std::log10(a)) - std::floor(std::log10(unit) + 1e-9)), 0, 3);
    std::snprintf(b, sizeof b, "%.*e", digits, value);
    return b;
  }
  return fixed(value, decimals_for(unit));
}

const std::string& palette_color(size_t i) {
  static const std::vector<std::string> colors = {"#3366cc", "#e8743b", "#19a979", "#8e6cc8", "#d64550",
                                                  "#2fa8c7", "#945f3d", "#d46ab0", "#6f7782", "#b8a630"};
  return colors[i % colors.size()];
}

namespace {

// A line chart's plot: its axes' ticks, the plot area's edges, and the mapping of data into it.
struct PlotArea {
  Ticks xt, yt;
  bool x_log = false;
  YScale scale = YScale::linear;
  double H = 0, left = 0, right = 0, top = 0, bottom = 0, plot_w = 0, plot_h = 0;
  double px(double x) const {
    const double f = x_log ? (std::log10(x) - std::log10(xt.lo)) / (std::log10(xt.hi) - std::log10(xt.lo))
                           : (x - xt.lo) / (xt.hi - xt.lo);
    return left + f * plot_w;
  }
  double py(double y) const {
    const double f = scale == YScale::log
                         ? (std::log10(y) - std::log10(yt.lo)) / (std::log10(yt.hi) - std::log10(yt.lo))
                         : (y - yt.lo) / (yt.hi - yt.lo);
    return bottom - f * plot_h;
  }
};

// The axes' ticks over the usable points (a default range when there is none: `empty`).
void fit_ticks(const LineChart& c, PlotArea& a, bool& empty) {
  const YScale scale = c.y_scale;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const Series& s : c.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!usable(s.x[i], c.x_log ? YScale::log : YScale::linear) || !usable(s.y[i], scale)) continue;
      xlo = std::min(xlo, s.x[i]), xhi = std::max(xhi, s.x[i]);
      ylo = std::min(ylo, s.y[i]), yhi = std::max(yhi, s.y[i]);
    }
  empty = !std::isfinite(xlo);
  if (empty) {
    xlo = c.x_log ? 1 : 0, xhi = c.x_log ? 10 : 1;
    ylo = scale == YScale::log ? 1 : 0, yhi = scale == YScale::log ? 10 : 1;
  }
  if (c.y_from_zero && scale == YScale::linear) ylo = std::min(ylo, 0.0), yhi = std::max(yhi, 0.0);
  a.xt = x_axis(c, xlo, xhi);
  a.yt = scale == YScale::log ? log_ticks(ylo, yhi) : nice_ticks(ylo, yhi, 5);
  a.x_log = c.x_log;
  a.scale = scale;
}

// The grid, the ticks and their labels, the axes and their labels ("no data" on an empty chart).
std::string axes_svg(const LineChart& c, const PlotArea& a, const std::vector<std::string>& ylabels, bool empty) {
  std::string s;
  for (size_t i = 0; i < a.yt.values.size(); ++i) {
    const double y = a.py(a.yt.values[i]);
    s += line(a.left, y, a.right, y, kGrid);
    s += text(a.left - 6, y + 4, ylabels[i], "end");
  }
  for (double v : a.xt.values) {
    const double x = a.px(v);
    s += line(x, a.top, x, a.bottom, kGrid);
    s += line(x, a.bottom, x, a.bottom + 4, kAxis);
    s += text(x, a.bottom + 16, tick_label(v, a.xt.step), "middle");
  }
  s += line(a.left, a.bottom, a.right, a.bottom, kAxis);
  s += line(a.left, a.top, a.left, a.bottom, kAxis);
  s += text((a.left + a.right) / 2, a.H - 8, c.x_label, "middle", kText);
  s += text(0, 0, c.y_label, "middle", kText,
            " transform=\"translate(14 " + num((a.top + a.bottom) / 2) + ") rotate(-90)\"");
  if (empty) s += text((a.left + a.right) / 2, (a.top + a.bottom) / 2, "no data", "middle");
  return s;
}

// A series: a path, gaps where a value is missing, thinned past two points per pixel; dots where
// they are few enough.
std::string series_svg(const Series& se, const std::string& color, const PlotArea& a) {
  Pixels pts;
  const size_t n = std::min(se.x.size(), se.y.size());
  for (size_t i = 0; i < n; ++i) {
    if (usable(se.x[i], a.x_log ? YScale::log : YScale::linear) && usable(se.y[i], a.scale))
      pts.push_back({a.px(se.x[i]), a.py(se.y[i])});
    else pts.push_back({NAN, NAN});
  }
  const std::string d = path_data(double(pts.size()) > 2 * a.plot_w ? thinned(pts) : pts);
  std::string s =
      "<g class=\"series\" data-name=\"" + xml_escape(se.name) + "\">\n<title>" + xml_escape(se.name) + "</title>\n";
  if (!d.empty())
    s += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + color +
         "\" stroke-width=\"1.8\" stroke-linejoin=\"round\" stroke-linecap=\"round\"" +
         (se.dash.empty() ? std::string() : " stroke-dasharray=\"" + se.dash + "\"") + "/>\n";
  size_t finite = 0;
  for (const auto& pt : pts) finite += std::isnan(pt.first) ? 0 : 1;
  if (se.markers && double(finite) <= a.plot_w / 6)  // denser dots would only thicken the line
    for (const auto& [x, y] : pts)
      if (!std::isnan(x))
        s += "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"3.2\" fill=\"" + color +
             "\" stroke=\"#ffffff\" stroke-width=\"1\"/>\n";
  return s + "</g>\n";
}

}  // namespace

std::string line_chart_svg(const LineChart& c) {
  PlotArea a;
  bool empty = false;
  fit_ticks(c, a, empty);
  std::vector<std::string> ylabels;
  double ylabel_w = 0;
  for (double v : a.yt.values) {
    ylabels.push_back(tick_label(v, a.yt.step));
    ylabel_w = std::max(ylabel_w, text_width(ylabels.back()));
  }
  const double W = c.width;
  a.left = 26 + ylabel_w + 6;
  a.right = W - kRight;
  std::vector<LegendItem> legend;
  for (size_t i = 0; i < c.series.size(); ++i)
    legend.push_back({c.series[i].name, c.series[i].color.empty() ? palette_color(i) : c.series[i].color,
                      c.series[i].dash, false});
  const int rows = std::max(1, legend_rows(legend, a.left, a.right));
  a.top = kLegendTop + rows * kLegendRow + 10;
  a.H = c.height + (rows - 1) * kLegendRow;
  a.bottom = a.H - kBottom, a.plot_w = a.right - a.left, a.plot_h = a.bottom - a.top;

  std::string s = svg_open(W, a.H, c.title);
  s += legend_svg(legend, a.left, a.right);
  s += axes_svg(c, a, ylabels, empty);
  for (size_t k = 0; k < c.series.size(); ++k) s += series_svg(c.series[k], legend[k].color, a);
  return s + "</svg>\n";
}

std::string stacked_bars_svg(const StackedBars& c) {
  const double W = c.width;
  double label_w = 0, max_total = 0;
  for (const std::string& b : c.bars) label_w = std::max(label_w, text_width(b));
  std::vector<double> totals;
  for (const std::vector<double>& row : c.values) {
    double t = 0;
    for (double v : row)
      if (std::isfinite(v) && v > 0) t += v;
    totals.push_back(t);
    max_total = std::max(max_total, t);
  }
  std::vector<LegendItem> legend;
  for (size_t i = 0; i < c.parts.size(); ++i)
    legend.push_back({c.parts[i], i < c.colors.size() && !c.colors[i].empty() ? c.colors[i] : palette_color(i), "", true});
  const double left = 12 + label_w + 10, right = W - 56;
  const int rows = std::max(1, legend_rows(legend, 12, W - kRight));
  const double top = kLegendTop + rows * kLegendRow + 10, bar_h = 18, pitch = 26;
  const double bottom = top + pitch * double(c.bars.size()) + 4, H = bottom + kBottom;
  const Ticks xt = nice_ticks(0, max_total > 0 ? max_total : 1, 6);
  auto px = [&](double v) { return left + v / xt.hi * (right - left); };

  std::string s = svg_open(W, H, c.title);
  s += legend_svg(legend, 12, W - kRight);
  for (double v : xt.values) {
    const double x = px(v);
    s += line(x, top, x, bottom, kGrid);
    s += text(x, bottom + 16, tick_label(v, xt.step), "middle");
  }
  s += line(left, bottom, px(xt.hi), bottom, kAxis);
  s += text((left + right) / 2, H - 8, c.value_label, "middle", kText);
  for (size_t b = 0; b < c.bars.size(); ++b) {
    const double y = top + pitch * double(b) + (pitch - bar_h) / 2;
    s += "<g class=\"bar\" data-name=\"" + xml_escape(c.bars[b]) + "\">\n";
    s += text(left - 8, y + bar_h / 2 + 4, c.bars[b], "end", kText);
    double at = 0;
    const std::vector<double> none;
    const std::vector<double>& row = b < c.values.size() ? c.values[b] : none;
    for (size_t p = 0; p < row.size() && p < c.parts.size(); ++p) {
      if (!std::isfinite(row[p]) || row[p] <= 0) continue;
      const double x0 = px(at), x1 = px(at + row[p]);
      const double share = totals[b] > 0 ? 100.0 * row[p] / totals[b] : 0.0;
      s += "<rect class=\"segment\" x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(0.0, x1 - x0)) +
           "\" height=\"" + num(bar_h) + "\" fill=\"" + legend[p].color + "\"><title>" +
           xml_escape(c.parts[p] + ": " + short_number(row[p]) + " (" + fixed(share, 1) + "%)") + "</title></rect>\n";
      at += row[p];
    }
    s += text(px(at) + 6, y + bar_h / 2 + 4, short_number(totals[b]), "start", kMuted);
    s += "</g>\n";
  }
  if (c.bars.empty()) s += text((left + right) / 2, (top + bottom) / 2, "no data", "middle");
  return s + "</svg>\n";
}

}  // namespace dtrain
