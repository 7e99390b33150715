// Tests for a sweep's grid: entries read into keys and values (and each malformed entry's one error),
// the Cartesian product in order (first key slowest), and point names: last key components, full keys
// where two share one, characters a file name cannot hold replaced, names that would collide refused.
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "train/commands/sweep_grid.hpp"

using namespace dtrain;

TEST(SweepGrid, ReadsKeysAndValuesInOrder) {
  const std::vector<GridAxis> axes = parse_grid("  train.lr=1e-3,3e-3\tmodel.dim=128,256,512 ");
  ASSERT_EQ(axes.size(), 2u);
  EXPECT_EQ(axes[0].key, "train.lr");
  EXPECT_EQ(axes[0].values, (std::vector<std::string>{"1e-3", "3e-3"}));
  EXPECT_EQ(axes[1].key, "model.dim");
  EXPECT_EQ(axes[1].values, (std::vector<std::string>{"128", "256", "512"}));
  // a value may hold '=' (only the first one ends the key)
  EXPECT_EQ(parse_grid("data.dir=a=b")[0].values, (std::vector<std::string>{"a=b"}));
}

TEST(SweepGrid, RefusesMalformedEntries) {
  EXPECT_NE(error_of([] { parse_grid("train.lr"); }).find("`train.lr` is not key=v1,v2"), std::string::npos);
  EXPECT_NE(error_of([] { parse_grid("=1,2"); }).find("`=1,2` is not key=v1,v2"), std::string::npos);
  EXPECT_NE(error_of([] { parse_grid("train.lr="); }).find("`train.lr=` has no value"), std::string::npos);
  EXPECT_NE(error_of([] { parse_grid("train.lr=1e-3,,2e-3"); }).find("has an empty value"), std::string::npos);
  EXPECT_NE(error_of([] { parse_grid("train.lr=1e-3,"); }).find("has an empty value"), std::string::npos);
  EXPECT_NE(error_of([] { parse_grid("train.lr=1 model.dim=2 train.lr=3"); }).find("names train.lr twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_grid("   "); }).find("names no key"), std::string::npos);
}

TEST(SweepGrid, ExpandsTheProductFirstKeySlowest) {
  const std::vector<GridPoint> points = expand_grid(parse_grid("train.lr=1e-3,3e-3 model.dim=128,256"));
  std::vector<std::string> names;
  for (const GridPoint& p : points) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"lr=1e-3,dim=128", "lr=1e-3,dim=256", "lr=3e-3,dim=128",
                                             "lr=3e-3,dim=256"}));
  ASSERT_EQ(points[2].values.size(), 2u);
  EXPECT_EQ(points[2].values[0], (std::pair<std::string, std::string>{"train.lr", "3e-3"}));
  EXPECT_EQ(points[2].values[1], (std::pair<std::string, std::string>{"model.dim", "128"}));
  // one value per key: one point
  EXPECT_EQ(expand_grid(parse_grid("train.lr=1e-3 train.seed=7")).size(), 1u);
  EXPECT_EQ(expand_grid(parse_grid("a.x=1,2 b.y=1,2,3 c.z=1,2")).size(), 12u);
}

TEST(SweepGrid, NamesByLastComponentUnlessShared) {
  EXPECT_EQ(axis_labels(parse_grid("train.lr=1 model.dim=2")), (std::vector<std::string>{"lr", "dim"}));
  EXPECT_EQ(axis_labels(parse_grid("model.dropout=0.1 optim.dropout=0.2 train.seed=1")),
            (std::vector<std::string>{"model.dropout", "optim.dropout", "seed"}));
  EXPECT_EQ(axis_labels(parse_grid("device=cpu")), (std::vector<std::string>{"device"}));
}

TEST(SweepGrid, MakesNamesFileSystemSafe) {
  EXPECT_EQ(point_name({"dir", "kind"}, {"data/a b", "x\ty"}), "dir=data_a_b,kind=x_y");
  // two values that collide once '/' is replaced: refused, naming both points
  EXPECT_NE(error_of([] { expand_grid(parse_grid("data.dir=a/b,a_b")); }).find("points 1 and 2 would share the run dir "
                                                                              "name `dir=a_b`"),
            std::string::npos);
  EXPECT_NE(error_of([] { expand_grid(parse_grid("train.lr=" + std::string(300, '1'))); }).find("longer than 200"),
            std::string::npos);
}
