// The rendezvous rule of fixed-size and elastic jobs: when a round closes, with whom, in which
// order, and what a change of nodes says (launch/membership).
#include <gtest/gtest.h>

#include "launch/membership.hpp"

using namespace dtrain;

namespace {

Joiner node(int64_t id, const std::string& name, int hint = -1, int workers = 2, bool alive = true) {
  return Joiner{id, hint, workers, name, alive};
}

std::vector<int64_t> ids(const std::vector<Joiner>& v) {
  std::vector<int64_t> out;
  for (const auto& j : v) out.push_back(j.id);
  return out;
}

RoundView elastic(int lo, int hi) {
  RoundView v;
  v.min_nodes = lo;
  v.max_nodes = hi;
  v.last_call = 30;
  v.timeout = 300;
  return v;
}

}  // namespace

TEST(Membership, FixedSizeClosesWithEveryNodeRankInRankOrder) {
  RoundView v = elastic(3, 3);
  v.joined = {node(1, "a", 2), node(2, "b", 0)};
  EXPECT_FALSE(decide_round(v).close);
  v.joined.push_back(node(3, "c", 1));
  const Closing c = decide_round(v);
  ASSERT_TRUE(c.close);
  EXPECT_EQ(ids(c.members), (std::vector<int64_t>{2, 3, 1}));
  EXPECT_EQ(first_rank_of(c.members, 2), 4);
  EXPECT_EQ(world_of(c.members), 6);
  // past the timeout, the missing node ranks are named
  v.joined.pop_back();
  v.waited = 301;
  EXPECT_EQ(decide_round(v).error, "node rank(s) 1 did not arrive within 300 s; start dtrun on every node with the same "
                                   "--nnodes, --rdzv-endpoint and --rdzv-id");
  v.joined = {node(1, "a", 0), node(2, "b", 0)};
  EXPECT_NE(decide_round(v).error.find("two nodes say they are node rank 0 (the second: b)"), std::string::npos);
}

TEST(Membership, ElasticFirstRoundWaitsForTheLastCallOrMax) {
  RoundView v = elastic(1, 3);
  v.joined = {node(1, "a"), node(2, "b")};
  v.since_last_join = 5;
  EXPECT_FALSE(decide_round(v).close);  // more may come
  v.since_last_join = 30;
  Closing c = decide_round(v);
  ASSERT_TRUE(c.close);
  EXPECT_EQ(ids(c.members), (std::vector<int64_t>{1, 2}));
  v.since_last_join = 5;
  v.waited = 300;
  EXPECT_TRUE(decide_round(v).close);  // the timeout ends the last call too
  v.waited = 5;
  v.since_last_join = 0;
  v.joined.push_back(node(3, "c"));
  EXPECT_TRUE(decide_round(v).close);  // MAX: at once
  // below MIN it waits, then names what it has
  v = elastic(2, 4);
  v.joined = {node(1, "a")};
  v.since_last_join = 100;
  EXPECT_FALSE(decide_round(v).close);
  v.waited = 300;
  EXPECT_EQ(decide_round(v).error, "1 node(s) (a) joined within 300 s, fewer than the 2 --nnodes 2:4 needs: bring nodes "
                                   "back (start dtrun there with the same --rdzv-endpoint and --rdzv-id) or lower MIN");
}

TEST(Membership, ARestartClosesOnceEveryLiveMemberIsBack) {
  RoundView v = elastic(1, 3);
  v.previous = {node(1, "a"), node(2, "b")};
  v.joined = {node(1, "a")};
  EXPECT_FALSE(decide_round(v).close);  // b is alive: it may still come
  v.previous[1].alive = false;           // b's heartbeat stopped: go on without it
  Closing c = decide_round(v);
  ASSERT_TRUE(c.close);
  EXPECT_EQ(ids(c.members), (std::vector<int64_t>{1}));
  EXPECT_EQ(describe_change(v.previous, c.members), "lost b");
  EXPECT_EQ(describe_size(c.members), "1 node, 2 workers");
  // a node that waited joins with the others, after them
  v.previous = {node(1, "a")};
  v.joined = {node(4, "d"), node(1, "a")};
  c = decide_round(v);
  ASSERT_TRUE(c.close);
  EXPECT_EQ(ids(c.members), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(describe_change(v.previous, c.members), "joined d");
  EXPECT_EQ(describe_change(c.members, c.members), "");
  // a joiner whose heartbeat stopped is not taken
  v.joined = {node(1, "a"), node(4, "d", -1, 2, false)};
  EXPECT_EQ(ids(decide_round(v).members), (std::vector<int64_t>{1}));
}

TEST(Membership, MoreThanMaxKeepsThePreviousMembersAndNodeRanksOrder) {
  RoundView v = elastic(1, 2);
  v.previous = {node(5, "e"), node(6, "f")};
  v.joined = {node(7, "g", 0), node(6, "f"), node(5, "e")};
  const Closing c = decide_round(v);
  ASSERT_TRUE(c.close);
  EXPECT_EQ(ids(c.members), (std::vector<int64_t>{5, 6}));
  // a node rank given orders the members before those without one
  v.previous.clear();
  v.joined = {node(1, "a"), node(2, "b", 1), node(3, "c", 0)};
  v.max_nodes = 3;
  EXPECT_EQ(ids(decide_round(v).members), (std::vector<int64_t>{3, 2, 1}));
}

TEST(Membership, JoinerRecordsRoundTrip) {
  Joiner j;
  ASSERT_TRUE(decode_joiner(4, encode_joiner(node(4, "n1 (10.0.0.2)", 3, 8)), j));
  EXPECT_EQ(j.id, 4);
  EXPECT_EQ(j.hint, 3);
  EXPECT_EQ(j.workers, 8);
  EXPECT_EQ(j.name, "n1 (10.0.0.2)");
  ASSERT_TRUE(decode_joiner(1, "-1 2 x", j));
  EXPECT_EQ(j.hint, -1);
  EXPECT_FALSE(decode_joiner(1, "a 2 x", j));
  EXPECT_FALSE(decode_joiner(1, "0 0 x", j));
  EXPECT_FALSE(decode_joiner(1, "0 2", j));
}
