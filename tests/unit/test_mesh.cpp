// The device mesh: shapes fitted to the world (with -1) and refused with the numbers named, rank ↔
// coordinate layout (tp fastest), the members of every group for several shapes including tp and pp,
// and, on forked ranks, collectives over each group reaching exactly its members.
#include <gtest/gtest.h>

#include "comm/mesh.hpp"
#include "comm_test_util.hpp"
#include "error_of.hpp"

using namespace dtrain;
using dist_test::env_for;
using dist_test::run_ranks;
using Groups = std::vector<std::vector<int>>;

TEST(Mesh, ShapesFitTheWorldOrNameTheNumbers) {
  MeshShape s = MeshShape::fit(8, 1, -1, 2, 2);
  EXPECT_EQ(s.dp_replicate, 2);
  EXPECT_EQ(s.size(), 8);
  EXPECT_EQ(s.dp(), 4);
  EXPECT_EQ(s.describe(), "pp 1 × dp_replicate 2 × dp_shard 2 × tp 2");
  EXPECT_EQ(MeshShape::fit(4, 1, -1, 1, 1).dp_replicate, 4);
  EXPECT_EQ(MeshShape::fit(6, 3, 1, 2, 1).size(), 6);
  std::string e = error_of([] { MeshShape::fit(4, 1, 2, 3, 1); });
  EXPECT_NE(e.find("parallel.pp 1 × parallel.dp_replicate 2 × parallel.dp_shard 3 × parallel.tp 1 = 6 ranks, but the job has 4"),
            std::string::npos) << e;
  e = error_of([] { MeshShape::fit(6, 1, -1, 4, 1); });
  EXPECT_NE(e.find("cannot fill a world of 6 ranks"), std::string::npos) << e;
  e = error_of([] { MeshShape::fit(4, -1, -1, 1, 1); });
  EXPECT_NE(e.find("at most one of them may be -1"), std::string::npos) << e;
  e = error_of([] { MeshShape::fit(4, 1, 4, 1, 0); });
  EXPECT_NE(e.find("parallel.tp = 0"), std::string::npos) << e;
}

// An elastic job's world changed size: tp and pp stay, the data-parallel dimensions give way
// (dp_shard kept where it divides the new dp, else sharding over all of it), with a note; a world
// that is no multiple of tp × pp is one line.
TEST(Mesh, ElasticWorldsKeepTpAndPpAndResizeDataParallel) {
  std::string note;
  MeshShape s = MeshShape::fit_elastic(4, 1, -1, 4, 1, note);  // sizes that fit: as given, no note
  EXPECT_EQ(s.dp_shard, 4);
  EXPECT_EQ(note, "");
  s = MeshShape::fit_elastic(2, 1, -1, 4, 1, note);  // FSDP over 4 shrank to 2 ranks
  EXPECT_EQ(s.describe(), "pp 1 × dp_replicate 1 × dp_shard 2 × tp 1");
  EXPECT_EQ(note, "elastic job: parallel.* asked for pp 1 × dp_replicate -1 × dp_shard 4 × tp 1, which does not make "
                  "this world of 2 ranks: running as pp 1 × dp_replicate 1 × dp_shard 2 × tp 1");
  s = MeshShape::fit_elastic(8, 2, 2, 2, 2, note);  // 16 ranks' shape on 8: dp_shard 2 still divides dp 2
  EXPECT_EQ(s.describe(), "pp 2 × dp_replicate 1 × dp_shard 2 × tp 2");
  s = MeshShape::fit_elastic(12, 1, 4, 2, 1, note);  // grown past the shape: dp 12 = 6 replicas × 2 shards
  EXPECT_EQ(s.describe(), "pp 1 × dp_replicate 6 × dp_shard 2 × tp 1");
  s = MeshShape::fit_elastic(6, 1, 2, 4, 1, note);  // dp_shard 4 does not divide dp 6: shard over all 6
  EXPECT_EQ(s.describe(), "pp 1 × dp_replicate 1 × dp_shard 6 × tp 1");
  s = MeshShape::fit_elastic(3, 1, 4, 1, 1, note);  // plain DDP stays plain DDP
  EXPECT_EQ(s.describe(), "pp 1 × dp_replicate 3 × dp_shard 1 × tp 1");
  s = MeshShape::fit_elastic(6, 1, 2, -1, 1, note);  // dp_shard -1 beside a dp_replicate that divides dp
  EXPECT_EQ(s.describe(), "pp 1 × dp_replicate 2 × dp_shard 3 × tp 1");
  EXPECT_EQ(MeshShape::fit_elastic(6, 1, -1, 1, 2, note).dp_replicate, 3);  // -1 fills, as fit does
  std::string e = error_of([&] { MeshShape::fit_elastic(6, 2, -1, 1, 2, note); });
  EXPECT_NE(e.find("a world of 6 ranks no longer fits parallel.tp × parallel.cp × parallel.pp = 2 × 1 × 2 = 4 ranks per model copy"),
            std::string::npos) << e;
  e = error_of([&] { MeshShape::fit_elastic(4, 1, 4, 1, 0, note); });  // what fit refuses stays refused
  EXPECT_NE(e.find("parallel.tp = 0"), std::string::npos) << e;
  // not elastic: the same sizes are refused as before
  EXPECT_NE(error_of([] { MeshShape::fit(2, 1, -1, 4, 1); }).find("cannot fill a world of 2 ranks"), std::string::npos);
}

TEST(Mesh, RanksAndCoordinatesRoundTripWithTpFastest) {
  const MeshShape s = MeshShape::fit(24, 2, 3, 2, 2);
  for (int r = 0; r < s.size(); ++r) EXPECT_EQ(mesh_rank(s, mesh_coord(s, r)), r);
  const MeshCoord c = mesh_coord(s, 1);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.dp_shard, 0);
  const MeshCoord last = mesh_coord(s, 23);
  EXPECT_EQ(last.pp, 1);
  EXPECT_EQ(last.dp_replicate, 2);
  EXPECT_EQ(last.dp_shard, 1);
  EXPECT_EQ(last.tp, 1);
  EXPECT_EQ(last.dp_index(s), 5);
}

TEST(Mesh, GroupMembersForSeveralShapes) {
  // pp 2 × dp_shard 2 × tp 2 (8 ranks)
  const MeshShape a = MeshShape::fit(8, 2, 1, 2, 2);
  EXPECT_EQ(mesh_groups(a, {MeshDim::tp}), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(mesh_groups(a, {MeshDim::dp_shard}), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(mesh_groups(a, {MeshDim::pp}), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(mesh_groups(a, {MeshDim::dp_replicate}).size(), 8u);
  // dp_replicate 2 × dp_shard 2 (HSDP on 4 ranks)
  const MeshShape b = MeshShape::fit(4, 1, 2, 2, 1);
  EXPECT_EQ(mesh_groups(b, {MeshDim::dp_shard}), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(mesh_groups(b, {MeshDim::dp_replicate}), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(mesh_groups(b, {MeshDim::dp_replicate, MeshDim::dp_shard}), (Groups{{0, 1, 2, 3}}));
  // pp 3 × tp 2 with dp 2 (12 ranks): a pipeline group steps over dp × tp ranks
  const MeshShape c = MeshShape::fit(12, 3, 2, 1, 2);
  EXPECT_EQ(mesh_group(c, 5, {MeshDim::pp}), (std::vector<int>{1, 5, 9}));
  EXPECT_EQ(mesh_group(c, 5, {MeshDim::tp}), (std::vector<int>{4, 5}));
  EXPECT_EQ(mesh_group(c, 5, {MeshDim::dp_replicate}), (std::vector<int>{5, 7}));
  // every dimension's groups cover each rank exactly once
  for (MeshDim d : {MeshDim::pp, MeshDim::dp_replicate, MeshDim::dp_shard, MeshDim::tp}) {
    std::vector<int> seen(12, 0);
    for (const auto& g : mesh_groups(c, {d})) {
      EXPECT_EQ(int(g.size()), c.extent(d));
      for (int r : g) ++seen[size_t(r)];
    }
    EXPECT_EQ(seen, std::vector<int>(12, 1)) << mesh_dim_name(d);
  }
}

// On 4 forked ranks, each group's allreduce sums exactly its members' ranks.
void check_mesh_collectives(const MeshShape& shape) {
  auto rs = run_ranks(shape.size(), [shape](int r, int port) {
    World w(env_for(r, shape.size(), port, "test-token"), Millis(60000));
    DeviceMesh mesh(w, shape);
    RANK_CHECK(mesh_rank(shape, mesh.coord()) == r, "coordinate of rank " + std::to_string(r));
    auto expect_sum = [&](ProcessGroup& g, const std::vector<int>& members, const std::string& what) {
      RANK_CHECK(g.ranks() == members, what + " members");
      double v = r;
      g.allreduce(&v, 1);
      double want = 0;
      for (int m : members) want += m;
      RANK_CHECK(v == want, what + ": sum " + std::to_string(v) + ", expected " + std::to_string(want));
    };
    for (MeshDim d : {MeshDim::pp, MeshDim::dp_replicate, MeshDim::dp_shard, MeshDim::cp, MeshDim::tp})
      expect_sum(mesh.group(d), mesh_group(shape, r, {d}), mesh_dim_name(d));
    expect_sum(mesh.dp(), mesh_group(shape, r, {MeshDim::dp_replicate, MeshDim::dp_shard}), "dp");
    expect_sum(mesh.dp_cp(), mesh_group(shape, r, {MeshDim::dp_replicate, MeshDim::dp_shard, MeshDim::cp}), "dp_cp");
    expect_sum(mesh.shard(), mesh_group(shape, r, {MeshDim::dp_shard, MeshDim::cp}), "shard");
    w.shutdown();
  });
  EXPECT_EQ(dist_test::failures(rs), "") << shape.describe();
}

TEST(Mesh, EachGroupReducesOverExactlyItsMembers) {
  check_mesh_collectives(MeshShape::fit(4, 1, 2, 2, 1));  // HSDP
  check_mesh_collectives(MeshShape::fit(4, 2, 1, 1, 2));  // pp × tp
  check_mesh_collectives(MeshShape::fit(4, 1, -1, 1, 1));  // plain DDP: the world's own group
  check_mesh_collectives(MeshShape::fit(4, 1, 1, 2, 1, 2));  // FSDP × cp: shards over dp_shard × cp
  check_mesh_collectives(MeshShape::fit(4, 1, 2, 1, 1, 2));  // DDP × cp: gradients over dp_replicate × cp
  check_mesh_collectives(MeshShape::fit(4, 1, 1, 1, 2, 2));  // cp × tp
}

// Context parallel sits between dp_shard and tp: tp fastest, then cp; its ranks share the data-parallel
// index (they see the same samples); an elastic job keeps cp as it keeps tp and pp.
TEST(Mesh, ContextParallelIsBetweenDpShardAndTp) {
  const MeshShape s = MeshShape::fit(16, 1, -1, 2, 2, 2);
  EXPECT_EQ(s.dp_replicate, 2);
  EXPECT_EQ(s.describe(), "pp 1 × dp_replicate 2 × dp_shard 2 × cp 2 × tp 2");
  EXPECT_EQ(s.dp(), 4);
  for (int r = 0; r < s.size(); ++r) EXPECT_EQ(mesh_rank(s, mesh_coord(s, r)), r);
  const MeshCoord c = mesh_coord(s, 2);  // rank 2: tp 0, cp 1
  EXPECT_EQ(c.tp, 0);
  EXPECT_EQ(c.cp, 1);
  EXPECT_EQ(c.dp_index(s), mesh_coord(s, 0).dp_index(s));
  EXPECT_EQ(mesh_group(s, 0, {MeshDim::cp}), (std::vector<int>{0, 2}));
  EXPECT_EQ(mesh_group(s, 0, {MeshDim::dp_shard, MeshDim::cp}), (std::vector<int>{0, 2, 4, 6}));
  std::string e = error_of([] { MeshShape::fit(4, 1, 1, 1, 1, 2); });
  EXPECT_NE(e.find("parallel.cp 2 × parallel.tp 1 = 2 ranks, but the job has 4"), std::string::npos) << e;
  e = error_of([] { MeshShape::fit(4, 1, -1, 1, 1, 0); });
  EXPECT_NE(e.find("parallel.cp = 0"), std::string::npos) << e;
  std::string note;
  const MeshShape grown = MeshShape::fit_elastic(8, 1, -1, 1, 1, note, 2);
  EXPECT_EQ(grown.cp, 2);
  EXPECT_EQ(grown.dp_replicate, 4);
  const MeshShape shrunk = MeshShape::fit_elastic(4, 1, 4, 1, 1, note, 2);  // 8 ranks' shape on 4
  EXPECT_EQ(shrunk.describe(), "pp 1 × dp_replicate 2 × dp_shard 1 × cp 2 × tp 1");
  e = error_of([&] { MeshShape::fit_elastic(6, 1, 2, 1, 1, note, 4); });
  EXPECT_NE(e.find("parallel.tp × parallel.cp × parallel.pp = 1 × 4 × 1 = 4 ranks per model copy"), std::string::npos)
      << e;
}

TEST(Mesh, PlacementNamesEveryRank) {
  World w(DistEnv{}, Millis(1000));
  DeviceMesh mesh(w, MeshShape{});
  EXPECT_EQ(mesh.placement(), "rank 0: pp 0, dp_replicate 0, dp_shard 0, tp 0");
  EXPECT_EQ(mesh.dp().size(), 1);
}

// Expert parallel folds into dp_shard × cp (numbered dp_shard · cp + cp): runs of ep consecutive ones
// split the experts; the same place in a run holds the same experts.
TEST(Mesh, ExpertParallelFoldsIntoDpShardAndCp) {
  MeshShape s = MeshShape::fit(16, 1, 2, 2, 2, 2);  // dp_replicate 2 × dp_shard 2 × cp 2 × tp 2
  s.set_expert_parallel(2);
  EXPECT_EQ(s.describe(), "pp 1 × dp_replicate 2 × dp_shard 2 × cp 2 × tp 2, experts over ep 2");
  // rank 0: dp_shard 0, cp 0; rank 2: cp 1; rank 4: dp_shard 1; rank 8: dp_replicate 1; odd: tp 1
  EXPECT_EQ(expert_group(s, 0, ExpertGroup::ep), (std::vector<int>{0, 2}));
  EXPECT_EQ(expert_group(s, 5, ExpertGroup::ep), (std::vector<int>{5, 7}));
  EXPECT_EQ(expert_group(s, 0, ExpertGroup::shard), (std::vector<int>{0, 4}));
  EXPECT_EQ(expert_group(s, 2, ExpertGroup::replicas), (std::vector<int>{2, 6, 10, 14}));
  EXPECT_EQ(mesh_coord(s, 6).ep_index(s), 1);
  s.set_expert_parallel(4);
  EXPECT_EQ(expert_group(s, 8, ExpertGroup::ep), (std::vector<int>{8, 10, 12, 14}));
  EXPECT_EQ(expert_group(s, 8, ExpertGroup::shard), (std::vector<int>{8}));
  EXPECT_EQ(expert_group(s, 3, ExpertGroup::replicas), (std::vector<int>{3, 11}));
  const std::string e = error_of([&] { s.set_expert_parallel(3); });
  EXPECT_NE(e.find("parallel.ep = 3 must divide parallel.dp_shard × parallel.cp = 2 × 2"), std::string::npos) << e;
}
