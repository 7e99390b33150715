// Tests for the SVG charts of the HTML reports: tick choice (linear and log), tick labels, escaping,
// and that the charts are well-formed with one group per series (or bar) and their gaps and spikes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "metrics/svg_chart.hpp"
#include "xml_test_util.hpp"

using namespace dtrain;

namespace {

// The numbers after every "M" or "L" of the first path's d attribute in `svg`, as (x, y).
std::vector<std::pair<double, double>> path_points(const std::string& svg) {
  std::vector<std::pair<double, double>> pts;
  const size_t d = svg.find(" d=\"");
  const std::string path = svg.substr(d + 4, svg.find('"', d + 4) - d - 4);
  for (size_t i = 0; i < path.size(); ++i)
    if (path[i] == 'M' || path[i] == 'L') {
      double x = 0, y = 0;
      std::sscanf(path.c_str() + i + 1, "%lf %lf", &x, &y);
      pts.push_back({x, y});
    }
  return pts;
}

}  // namespace

TEST(SvgChart, LinearTicksAreRoundAndCoverTheRange) {
  Ticks t = nice_ticks(0, 97);
  EXPECT_DOUBLE_EQ(t.step, 20);
  EXPECT_DOUBLE_EQ(t.lo, 0);
  EXPECT_DOUBLE_EQ(t.hi, 100);
  EXPECT_EQ(t.values, (std::vector<double>{0, 20, 40, 60, 80, 100}));

  t = nice_ticks(0.3, 0.9);  // 0.3 / 0.1 is 2.9999…: no tick below 0.2
  EXPECT_NEAR(t.step, 0.2, 1e-12);
  EXPECT_NEAR(t.lo, 0.2, 1e-12);
  EXPECT_NEAR(t.hi, 1.0, 1e-12);
  EXPECT_EQ(t.values.size(), 5u);

  t = nice_ticks(-3, 7);
  EXPECT_DOUBLE_EQ(t.step, 2);
  EXPECT_NE(std::find(t.values.begin(), t.values.end(), 0.0), t.values.end()) << "0 is a tick exactly";

  t = nice_ticks(5, 5);  // one value: a range around it
  EXPECT_LT(t.lo, 5);
  EXPECT_GT(t.hi, 5);
  t = nice_ticks(41000, 41500);
  EXPECT_DOUBLE_EQ(t.step, 100);
  EXPECT_DOUBLE_EQ(t.lo, 41000);
  EXPECT_DOUBLE_EQ(t.hi, 41500);
}

TEST(SvgChart, LogTicks) {
  Ticks t = log_ticks(0.5, 800);  // four decades: powers of ten
  EXPECT_EQ(t.values.size(), 5u);
  EXPECT_NEAR(t.lo, 0.1, 1e-12);
  EXPECT_NEAR(t.hi, 1000, 1e-9);
  t = log_ticks(3, 40);  // two decades: 1, 2, 5 times them
  ASSERT_EQ(t.values.size(), 5u);
  EXPECT_NEAR(t.values[0], 2, 1e-12);
  EXPECT_NEAR(t.values[1], 5, 1e-12);
  EXPECT_NEAR(t.values[4], 50, 1e-9);
}

TEST(SvgChart, TickLabels) {
  EXPECT_EQ(tick_label(0, 0.5), "0");
  EXPECT_EQ(tick_label(1500, 500), "1.5k");
  EXPECT_EQ(tick_label(40000, 10000), "40k");
  EXPECT_EQ(tick_label(2e6, 1e6), "2M");
  EXPECT_EQ(tick_label(0.25, 0.05), "0.25");
  EXPECT_EQ(tick_label(0.4, 0.2), "0.4");
  EXPECT_EQ(tick_label(120, 20), "120");
  EXPECT_EQ(tick_label(0.0004, 0.0002), "4e-04");
  EXPECT_EQ(tick_label(0.0012, 0.0002), "1.2e-03");
  EXPECT_EQ(tick_label(0.01, 0), "0.01");  // a log axis: each label on its own
}

TEST(SvgChart, Escaping) {
  EXPECT_EQ(xml_escape("<a & 'b'>\"c\""), "&lt;a &amp; &#39;b&#39;&gt;&quot;c&quot;");
  EXPECT_EQ(xml_escape(std::string("x\x01y")), "x y");
}

TEST(SvgChart, LineChartHasOneGroupPerSeriesAndIsWellFormed) {
  LineChart c;
  c.title = "Loss <of> \"runs\" & more";
  c.x_label = "step";
  c.y_label = "loss";
  for (int k = 0; k < 3; ++k) {
    Series s;
    s.name = k == 1 ? "run <b>&</b>" : "run " + std::to_string(k);
    for (int i = 0; i < 20; ++i) s.x.push_back(i), s.y.push_back(k + 1.0 / (1 + i));
    s.markers = k == 2;
    c.series.push_back(s);
  }
  const std::string svg = line_chart_svg(c);
  EXPECT_EQ(balance_problem(svg), "");
  EXPECT_EQ(count_of(svg, "<g class=\"series\""), 3u);
  EXPECT_EQ(count_of(svg, "<circle"), 20u) << "markers on the one series that asks for them";
  EXPECT_EQ(svg.find("run <b>"), std::string::npos);
  EXPECT_NE(svg.find("run &lt;b&gt;&amp;&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(svg.find("Loss &lt;of&gt; &quot;runs&quot; &amp; more"), std::string::npos);
  EXPECT_EQ(svg.find("http"), std::string::npos);
}

TEST(SvgChart, GapsLogScaleAndEmptyCharts) {
  LineChart c;
  Series s;
  s.x = {1, 2, 3, 4, 5, 6};
  s.y = {1, 2, NAN, 4, 5, 6};
  c.series.push_back(s);
  std::string svg = line_chart_svg(c);
  EXPECT_EQ(count_of(svg.substr(svg.find(" d=\"")), "M"), 2u) << "the NaN splits the line in two";
  c.y_scale = YScale::log;
  c.series[0].y = {-1, 10, 100, 1000, 0, 5};  // <= 0 has no place on a log axis
  svg = line_chart_svg(c);
  EXPECT_EQ(balance_problem(svg), "");
  EXPECT_EQ(count_of(svg.substr(svg.find(" d=\"")), "M"), 2u);
  EXPECT_EQ(svg.find("no data"), std::string::npos);
  c.series[0].y = {NAN, NAN, NAN, NAN, NAN, NAN};
  EXPECT_NE(line_chart_svg(c).find("no data"), std::string::npos);
}

TEST(SvgChart, LongSeriesKeepTheirSpikes) {
  LineChart c;
  Series s;
  for (int i = 0; i < 20000; ++i) s.x.push_back(i), s.y.push_back(i == 12345 ? 100.0 : 1.0 + (i % 7) * 0.01);
  c.series.push_back(s);
  const std::string svg = line_chart_svg(c);
  const auto pts = path_points(svg);
  EXPECT_LT(pts.size(), 4000u) << "thinned to a few points per pixel column";
  double top = 1e9;
  for (const auto& [x, y] : pts) top = std::min(top, y);
  EXPECT_LT(top, 80) << "the spike to 100 (the plot's top) is still drawn";
  c.series[0].markers = true;
  EXPECT_EQ(count_of(line_chart_svg(c), "<circle"), 0u) << "no dots where they would be denser than the line";
}

TEST(SvgChart, StackedBars) {
  StackedBars b;
  b.title = "phases";
  b.value_label = "ms";
  b.bars = {"rank 0", "rank 1"};
  b.parts = {"forward", "comm", "backward"};
  b.colors = {"#112233"};
  b.values = {{30, 0, 60}, {31, 5, 61}};
  const std::string svg = stacked_bars_svg(b);
  EXPECT_EQ(balance_problem(svg), "");
  EXPECT_EQ(count_of(svg, "<g class=\"bar\""), 2u);
  EXPECT_EQ(count_of(svg, "class=\"segment\""), 5u) << "a zero part draws nothing";
  EXPECT_EQ(count_of(svg, "fill=\"#112233\""), 3u) << "the given colour on both bars and in the legend";
  EXPECT_NE(svg.find(">97<"), std::string::npos) << "rank 1's total";
}
