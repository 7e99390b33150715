// Tests for a scaling study's results from made-up summaries: what a point reads from summary.json
// (and the error when the run did not time its steps), speedup and efficiency (also from a
// smallest count other than 1), scaling.csv's columns and rows, and a well-formed scaling.html.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "error_of.hpp"
#include "metrics/scaling_report.hpp"
#include "xml_test_util.hpp"

using namespace dtrain;

namespace {

// A summary.json of the keys the study reads: comm grows with the workers.
Json summary(double tokens_per_s, int workers) {
  Json phases = Json::object();
  const std::vector<std::pair<std::string, double>> means = {
      {"data", 0.001}, {"forward", 0.03}, {"backward", 0.06}, {"optimizer", 0.01},
      {"comm", 0.004 * (workers - 1)}, {"checkpoint", 0.0}, {"eval", 0.0}, {"other", 0.002}};
  double step = 0;
  for (const auto& [name, s] : means) {
    phases[name] = {{"mean_s", s}, {"share", 0.1}, {"slowest_rank", 0}, {"slowest_mean_s", s}};
    step += s;
  }
  Json j = Json::object();
  j["steady_tokens_per_s"] = tokens_per_s;
  j["step_time"] = {{"warmup_steps", 1}, {"steps", 19}, {"mean_s", step}, {"phases", phases}};
  return j;
}

ScalingStudy study(const std::vector<int>& workers, const std::vector<double>& tps, const std::string& mode) {
  ScalingStudy s;
  s.mode = mode;
  s.settings = {{"config", "configs/<quick> & start.toml"}};
  for (size_t i = 0; i < workers.size(); ++i) {
    ScalingPoint p = scaling_point(workers[i], 64 / workers[i], 64, summary(tps[i], workers[i]), "s.json");
    p.run_dir = "out/nproc_" + std::to_string(workers[i]);
    s.points.push_back(p);
  }
  return s;
}

std::vector<std::vector<std::string>> csv_rows(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream l(line);
    for (std::string cell; std::getline(l, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST(ScalingReport, PointReadsTheSummary) {
  const ScalingPoint p = scaling_point(4, 16, 64, summary(1000, 4), "s.json");
  EXPECT_EQ(p.workers, 4);
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 1000);
  EXPECT_NEAR(p.step_seconds, 0.001 + 0.03 + 0.06 + 0.01 + 0.012 + 0.002, 1e-12);
  ASSERT_EQ(p.phases.size(), 8u);
  EXPECT_EQ(p.phases[4].first, "comm");
  EXPECT_NEAR(p.phases[4].second, 0.012, 1e-12);

  Json old = summary(1000, 4);
  old.erase("steady_tokens_per_s");
  const std::string e = error_of([&] { scaling_point(4, 16, 64, old, "out/nproc_4/summary.json"); });
  EXPECT_NE(e.find("out/nproc_4/summary.json has no steady_tokens_per_s"), std::string::npos) << e;
  old = summary(1000, 4);
  old.erase("step_time");
  EXPECT_NE(error_of([&] { scaling_point(4, 16, 64, old, "x"); }).find("step_time.mean_s"), std::string::npos);
}

TEST(ScalingReport, SpeedupAgainstTheSmallestCount) {
  std::vector<double> s = scaling_speedups(study({1, 2, 4}, {1000, 1800, 3000}, "strong"));
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(s[0], 1.0);
  EXPECT_DOUBLE_EQ(s[1], 1.8);
  EXPECT_DOUBLE_EQ(s[2], 3.0);
  // from 2 workers: 2 counts as ideal, 4 at 1.5× its throughput is a speedup of 3
  s = scaling_speedups(study({2, 4}, {1000, 1500}, "weak"));
  EXPECT_DOUBLE_EQ(s[0], 2.0);
  EXPECT_DOUBLE_EQ(s[1], 3.0);
}

TEST(ScalingReport, CsvColumnsAndRows) {
  const auto rows = csv_rows(scaling_csv(study({1, 2, 4}, {1000, 1800, 3000}, "strong")));
  ASSERT_EQ(rows.size(), 4u);
  const std::vector<std::string> head = {"workers", "per_rank_batch", "global_batch", "tokens_per_s", "step_seconds",
                                         "speedup", "efficiency", "data_s", "forward_s", "backward_s", "optimizer_s",
                                         "comm_s", "checkpoint_s", "eval_s", "other_s"};
  EXPECT_EQ(rows[0], head);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(rows[i].size(), head.size()) << "row " << i;
  EXPECT_EQ(rows[2][0], "2");
  EXPECT_EQ(rows[2][1], "32");
  EXPECT_EQ(rows[2][2], "64");
  EXPECT_EQ(rows[2][3], "1800");
  EXPECT_EQ(rows[2][5], "1.8");
  EXPECT_EQ(rows[2][6], "0.9");
  EXPECT_EQ(rows[3][6], "0.75");
  EXPECT_EQ(rows[3][11], "0.012") << "comm_s of 4 workers";
}

TEST(ScalingReport, HtmlIsWellFormedAndSaysHowItCounts) {
  const std::string html = scaling_html(study({1, 2, 4, 8}, {1000, 1800, 3000, 4000}, "strong"));
  EXPECT_EQ(balance_problem(html), "");
  EXPECT_EQ(count_of(html, "<svg"), 4u) << "speedup, efficiency, throughput, phases";
  EXPECT_EQ(count_of(html, "<g class=\"bar\""), 4u) << "a phase bar per point";
  EXPECT_NE(html.find("ideal (N)"), std::string::npos);
  EXPECT_NE(html.find("efficiency = speedup ÷ N"), std::string::npos);
  EXPECT_NE(html.find("configs/&lt;quick&gt; &amp; start.toml"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("not 1"), std::string::npos);
  const std::string from2 = scaling_html(study({2, 4}, {1000, 1500}, "weak"));
  EXPECT_NE(from2.find("The smallest worker count is 2, not 1"), std::string::npos);
  EXPECT_NE(from2.find("Weak scaling"), std::string::npos);
}
