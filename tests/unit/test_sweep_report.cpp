// Tests for a sweep's ranking from made-up run dirs: sweep.json written and read back, points ranked
// by best validation loss ascending (summary.json's, else the records'), classifiers by validation
// accuracy descending, and each point's state (finished, running or stopped, failed, not started).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "error_of.hpp"
#include "train/report/sweep_report.hpp"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

struct SweepDir {
  fs::path dir = fs::temp_directory_path() / ("test_sweep_report." + std::to_string(::getpid()));
  SweepDir() { fs::create_directories(dir / "status"); }
  ~SweepDir() { fs::remove_all(dir); }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((dir / rel).parent_path());
    std::ofstream(dir / rel) << text;
  }
  // A record of points named by one key "lr" with these values.
  void record(const std::vector<std::string>& values) const {
    SweepRecord r;
    r.config = "/c.toml";
    r.grid = {{"train.lr", values}};
    r.labels = {"lr"};
    for (const std::string& v : values) r.points.push_back({"lr=" + v, {{"train.lr", v}}});
    write_sweep_record(dir.string(), r);
  }
  std::vector<std::string> ranked_names(const SweepRanking& r) const {
    std::vector<std::string> out;
    for (const SweepRow& row : r.rows) out.push_back(r.record.points[row.point].name);
    return out;
  }
};

}  // namespace

TEST(SweepReport, RecordRoundTrips) {
  SweepDir d;
  d.record({"1", "2"});
  const SweepRecord r = read_sweep_record(d.dir.string());
  EXPECT_EQ(r.config, "/c.toml");
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_EQ(r.points[1].name, "lr=2");
  EXPECT_EQ(r.points[1].values[0], (std::pair<std::string, std::string>{"train.lr", "2"}));
  SweepRecord other = r;
  EXPECT_TRUE(r.same_sweep(other));
  other.grid[0].second.push_back("3");
  EXPECT_FALSE(r.same_sweep(other));
  d.write("sweep.json", "{\"x\": 1}");
  EXPECT_NE(error_of([&] { read_sweep_record(d.dir.string()); }).find("is not a dtrain sweep record"), std::string::npos);
}

TEST(SweepReport, RanksByLossAndSaysEachState) {
  SweepDir d;
  d.record({"1", "2", "3", "4", "5"});
  // lr=1 finished with 3.0; lr=2 finished with 2.0; lr=3 still going, best epoch 2.5; lr=4 failed; lr=5 not started
  d.write("lr=1/metrics.jsonl", "{\"type\":\"epoch\",\"step\":10,\"val_loss\":3.0}\n");
  d.write("lr=1/summary.json", "{\"best_val_loss\":3.0,\"steps\":10}");
  d.write("lr=2/metrics.jsonl", "{\"type\":\"epoch\",\"step\":10,\"val_loss\":2.0}\n");
  d.write("lr=2/summary.json", "{\"best_val_loss\":2.0,\"steps\":10}");
  d.write("lr=3/metrics.jsonl", "{\"type\":\"epoch\",\"step\":5,\"val_loss\":2.7}\n{\"type\":\"epoch\",\"step\":7,"
                                "\"val_loss\":2.5}\n{\"type\":\"train\",\"step\":8,\"loss\":2.4}\n");
  d.write("lr=4/train.log", "dtrain: error: x\n");
  d.write("status/lr=4", "2\n");
  const SweepRanking r = rank_sweep(d.dir.string());
  EXPECT_FALSE(r.by_accuracy);
  EXPECT_EQ(d.ranked_names(r), (std::vector<std::string>{"lr=2", "lr=3", "lr=1", "lr=4", "lr=5"}));
  EXPECT_EQ(r.rows[0].state.describe(), "finished");
  EXPECT_EQ(r.rows[1].state.describe(), "running or stopped");
  EXPECT_EQ(r.rows[1].state.steps, 8);
  EXPECT_EQ(r.rows[3].state.describe(), "failed (exit status 2)");
  EXPECT_EQ(r.rows[4].state.describe(), "not started");
  const std::string text = sweep_table_text(r);
  EXPECT_NE(text.find("best val loss"), std::string::npos);
  EXPECT_NE(text.find("1     2   2.0000"), std::string::npos) << text;
  EXPECT_NE(text.find("-     5   -"), std::string::npos) << text;
}

TEST(SweepReport, RanksClassifiersByAccuracy) {
  SweepDir d;
  d.record({"1", "2", "3"});
  // the lower loss is not the better accuracy: accuracy decides
  d.write("lr=1/metrics.jsonl", "{\"type\":\"epoch\",\"step\":4,\"val_loss\":0.5,\"val_accuracy\":0.80}\n");
  d.write("lr=2/metrics.jsonl", "{\"type\":\"epoch\",\"step\":4,\"val_loss\":0.6,\"val_accuracy\":0.85}\n"
                                "{\"type\":\"epoch\",\"step\":8,\"val_loss\":0.7,\"val_accuracy\":0.83}\n");
  d.write("lr=3/metrics.jsonl", "{\"type\":\"val\",\"step\":2,\"loss\":0.9,\"accuracy\":0.70}\n");
  const SweepRanking r = rank_sweep(d.dir.string());
  EXPECT_TRUE(r.by_accuracy);
  EXPECT_EQ(d.ranked_names(r), (std::vector<std::string>{"lr=2", "lr=1", "lr=3"}));
  EXPECT_NE(sweep_table_text(r).find("85.00%"), std::string::npos);
}
