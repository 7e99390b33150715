// Tests for pipeline schedules as data: the generators (GPipe, 1F1B, interleaved, ZB-H1, ZB-V) make
// valid lists with the textbook memory and bubbles; the validator names broken lists' problems;
// files round-trip; the simulated timeline writes as a Chrome trace.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/atomic_file.hpp"
#include "core/json.hpp"
#include "error_of.hpp"
#include "metrics/chrome_trace.hpp"
#include "parallel/pp/schedule.hpp"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dtrain_test_pp_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

int virtual_of(const std::string& name) { return name == "interleaved-1f1b" || name == "zb-v" ? 2 : 1; }

// The shapes each schedule is tested at: pp 2 and 4, micro-batches pp, 2pp and 8.
struct Shape {
  std::string name;
  int pp, v, m;
};
std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (const std::string& name : schedule_names())
    for (int pp : {2, 4})
      for (int m : {pp, 2 * pp, 8}) out.push_back({name, pp, virtual_of(name), m});
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

size_t count_of(const Schedule& s, Op op, int stage) {
  size_t n = 0;
  for (const auto& list : s.ranks)
    for (const Action& a : list) n += a.op == op && a.stage == stage;
  return n;
}

// Removes the first occurrence of `token` from rank r's list; false if absent.
bool erase_action(Schedule& s, int r, const std::string& token) {
  auto& list = s.ranks[r];
  auto it = std::find(list.begin(), list.end(), parse_action(token));
  if (it == list.end()) return false;
  list.erase(it);
  return true;
}

double bubble(const std::string& name, int pp, int m, const ActionCosts& c = {}) {
  return simulate(make_schedule(name, pp, virtual_of(name), m), c).mean_bubble;
}

}  // namespace

TEST(PpSchedule, ActionNotationRoundTrips) {
  for (Op op : {Op::F, Op::B, Op::I, Op::W, Op::SEND_F, Op::RECV_F, Op::SEND_B, Op::RECV_B}) {
    const Action a{op, 12, 7};
    EXPECT_EQ(parse_action(to_string(a)), a) << to_string(a);
  }
  EXPECT_EQ(to_string({Op::F, 0, 1}), "0F1");
  EXPECT_EQ(to_string({Op::SEND_F, 1, 0}), "1SEND_F0");
  EXPECT_EQ(to_string({Op::RECV_B, 2, 3}), "2RECV_B3");
  for (const char* bad : {"", "F0", "0F", "0X1", "0f1", "0F1x", "-1F0", "0SEND1", "0 F1"}) {
    const std::string msg = error_of([&] { parse_action(bad); });
    EXPECT_NE(msg.find(std::string("`") + bad + "`"), std::string::npos) << bad << ": " << msg;
  }
}

TEST(PpSchedule, EveryGeneratorMakesValidCompleteLists) {
  for (const Shape& sh : shapes()) {
    SCOPED_TRACE(sh.name + " pp " + std::to_string(sh.pp) + " m " + std::to_string(sh.m));
    const Schedule s = make_schedule(sh.name, sh.pp, sh.v, sh.m);
    EXPECT_EQ(joined(validate(s)), "");
    ASSERT_EQ(int(s.ranks.size()), sh.pp);
    ASSERT_EQ(s.stages(), sh.pp * sh.v);
    const bool split = sh.name.rfind("zb-", 0) == 0;
    EXPECT_EQ(s.split_backward(), split);
    for (int st = 0; st < s.stages(); ++st) {
      EXPECT_EQ(count_of(s, Op::F, st), size_t(sh.m)) << "stage " << st;
      EXPECT_EQ(count_of(s, split ? Op::I : Op::B, st), size_t(sh.m)) << "stage " << st;
      EXPECT_EQ(count_of(s, Op::W, st), split ? size_t(sh.m) : 0u) << "stage " << st;
    }
    for (int r = 0; r < sh.pp; ++r) {
      EXPECT_EQ(int(s.stages_of(r).size()), sh.v);
      for (const Action& a : s.ranks[r]) EXPECT_EQ(s.stage_rank[a.stage], r) << to_string(a);
    }
  }
}

TEST(PpSchedule, StagePlacements) {
  EXPECT_EQ(make_schedule("1f1b", 4, 1, 4).stage_rank, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(make_schedule("interleaved-1f1b", 4, 2, 8).stage_rank, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  const Schedule v = make_schedule("zb-v", 4, 2, 8);
  EXPECT_EQ(v.stage_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(v.stages_of(0), (std::vector<int>{0, 7}));
  // Between stages 3 and 4 (both on rank 3) nothing is sent.
  for (const Action& a : v.ranks[3]) EXPECT_FALSE(a.op == Op::SEND_F && a.stage == 3) << to_string(a);
}

TEST(PpSchedule, ActivationSlotsMatchTheTextbook) {
  for (const Shape& sh : shapes()) {
    SCOPED_TRACE(sh.name + " pp " + std::to_string(sh.pp) + " m " + std::to_string(sh.m));
    const Schedule s = make_schedule(sh.name, sh.pp, sh.v, sh.m);
    const std::vector<int> slots = s.slots(), peak = s.peak_in_flight();
    const std::vector<int> base = make_schedule("1f1b", sh.pp, 1, sh.m).slots();
    const int one_f_one_b = *std::max_element(base.begin(), base.end());
    EXPECT_EQ(one_f_one_b, std::min(sh.pp, sh.m));
    for (int r = 0; r < sh.pp; ++r) {
      if (sh.name == "gpipe") {
        EXPECT_EQ(slots[r], sh.m);
      }
      if (sh.name == "1f1b") {
        EXPECT_EQ(slots[r], std::min(sh.pp - r, sh.m));
      }
      if (sh.name == "zb-h1") {
        EXPECT_LE(slots[r], sh.pp);
      }
      // Two half-stages of a V are one whole-rank activation: no more than 1F1B's.
      if (sh.name == "zb-v") {
        EXPECT_LE(double(peak[r]) / sh.v, double(one_f_one_b));
      }
      EXPECT_LE(slots[r], peak[r]);
    }
  }
  // A validator bound of 1F1B's pp passes 1F1B and rejects GPipe.
  EXPECT_EQ(joined(validate(make_schedule("1f1b", 4, 1, 8), 4)), "");
  EXPECT_NE(joined(validate(make_schedule("gpipe", 4, 1, 8), 4)), "");
}

TEST(PpSchedule, GpipeAnd1f1bBubblesAreExact) {
  for (int pp : {2, 4})
    for (int m : {pp, 2 * pp, 8}) {
      const double textbook = double(pp - 1) / (m + pp - 1);
      EXPECT_DOUBLE_EQ(bubble("gpipe", pp, m), textbook) << pp << " " << m;
      EXPECT_DOUBLE_EQ(bubble("1f1b", pp, m), textbook) << pp << " " << m;
      EXPECT_DOUBLE_EQ(theoretical_bubble("1f1b", pp, 1, m), textbook);
      const Simulation sim = simulate(make_schedule("1f1b", pp, 1, m));
      for (double b : sim.bubble) EXPECT_DOUBLE_EQ(b, textbook);
      EXPECT_DOUBLE_EQ(sim.makespan, 3.0 * (m + pp - 1));
    }
}

TEST(PpSchedule, InterleavedAndZeroBubbleBeat1f1b) {
  for (int pp : {2, 4})
    for (int m : {pp, 2 * pp, 8}) {
      SCOPED_TRACE("pp " + std::to_string(pp) + " m " + std::to_string(m));
      const double base = bubble("1f1b", pp, m), inter = bubble("interleaved-1f1b", pp, m);
      const double h1 = bubble("zb-h1", pp, m), zv = bubble("zb-v", pp, m);
      EXPECT_LT(inter, base);
      EXPECT_NEAR(inter, theoretical_bubble("interleaved-1f1b", pp, 2, m), 1e-12);  // (p-1)/(vm+p-1)
      EXPECT_NEAR(h1, theoretical_bubble("zb-h1", pp, 1, m), 1e-12);                // (p-1)/(3m+p-1)
      EXPECT_LE(h1, (m >= 2 * pp ? 0.42 : 0.5) * base);
      EXPECT_LT(zv, h1);
      EXPECT_NEAR(zv, theoretical_bubble("zb-v", pp, 2, m), 1e-12);  // only the way down the V
    }
  // ZB-V's bubble falls towards zero with more micro-batches.
  EXPECT_LT(bubble("zb-v", 4, 32), 0.02);
}

TEST(PpSchedule, CommunicationDelaysTheSimulatedStep) {
  const Schedule s = make_schedule("1f1b", 4, 1, 8);
  ActionCosts slow;
  slow.comm = 0.5;
  const Simulation a = simulate(s), b = simulate(s, slow);
  EXPECT_DOUBLE_EQ(a.makespan, 33.0);
  EXPECT_GT(b.makespan, a.makespan + 2.9);  // at least 6 messages on the critical path
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(b.ranks[r].size(), 16u);
    for (size_t i = 1; i < b.ranks[r].size(); ++i) EXPECT_GE(b.ranks[r][i].start, b.ranks[r][i - 1].end);
  }
}

TEST(PpSchedule, UnsupportedShapesNameTheFix) {
  EXPECT_NE(error_of([] { make_schedule("zb-v", 4, 3, 8); }).find("parallel.pp_virtual = 2"), std::string::npos);
  EXPECT_NE(error_of([] { make_schedule("interleaved-1f1b", 4, 1, 8); }).find("pp_virtual >= 2"), std::string::npos);
  EXPECT_NE(error_of([] { make_schedule("interleaved-1f1b", 4, 2, 6); }).find("use 8 micro-batches"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_schedule("1f1b", 4, 2, 8); }).find("parallel.pp_virtual = 1"), std::string::npos);
  EXPECT_NE(error_of([] { make_schedule("pipedream", 4, 1, 8); }).find("gpipe, 1f1b"), std::string::npos);
  EXPECT_NE(error_of([] { make_schedule("1f1b", 4, 1, 0); }).find("micro-batches 0 is outside 1..4096"),
            std::string::npos);
}

// What a flag or a file may ask for is bounded before anything is made: no rank grows without
// limit, and a list with millions of problems prints a few and a count.
TEST(PpSchedule, ShapesAndProblemListsAreBounded) {
  EXPECT_NE(error_of([] { make_schedule("1f1b", 1000, 1, 4096); }).find("4096000 stage passes, more than the 131072"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_schedule("1f1b", 2000, 1, 8); }).find("pp 2000 is outside 1..1024"), std::string::npos);
  TempDir d;
  const std::string path = d / "huge.txt";
  write_text(path, "pp 2\nmicrobatches 1000000\nrank 0: 0F0\nrank 1: 1F0\n");
  const std::string msg = error_of([&] { read_schedule(path); });
  EXPECT_NE(msg.find(path + ": micro-batches 1000000 is outside 1..4096"), std::string::npos) << msg;
  // Every micro-batch of the largest allowed list missing: 20 problems listed, the rest counted.
  Schedule empty = make_schedule("gpipe", 2, 1, 4096);
  for (auto& list : empty.ranks) list.clear();
  const std::vector<std::string> problems = validate(empty);
  ASSERT_EQ(problems.size(), kMaxProblemsListed + 1);
  EXPECT_NE(problems.back().find("more problems (the first 20 are listed)"), std::string::npos) << problems.back();
}

// Broken lists, each with the one line that names what is wrong.
TEST(PpSchedule, ValidatorNamesAMissingForward) {
  Schedule s = make_schedule("1f1b", 2, 1, 2);
  ASSERT_TRUE(erase_action(s, 0, "0F1"));
  const std::string msg = joined(validate(s));
  EXPECT_NE(msg.find("rank 0: 0F1 is missing"), std::string::npos) << msg;
}

TEST(PpSchedule, ValidatorNamesWBeforeI) {
  Schedule s = make_schedule("zb-h1", 2, 1, 2);
  auto& list = s.ranks[1];
  auto i = std::find(list.begin(), list.end(), parse_action("1I0"));
  auto w = std::find(list.begin(), list.end(), parse_action("1W0"));
  ASSERT_TRUE(i != list.end() && w != list.end());
  std::iter_swap(i, w);
  const std::string msg = joined(validate(s));
  EXPECT_NE(msg.find("rank 1: 1W0 comes before 1I0"), std::string::npos) << msg;
}

TEST(PpSchedule, ValidatorNamesAnUnmatchedSend) {
  Schedule s = make_schedule("1f1b", 2, 1, 2);
  ASSERT_TRUE(erase_action(s, 1, "1RECV_F0"));
  const std::string msg = joined(validate(s));
  EXPECT_NE(msg.find("rank 0: 0SEND_F0 has no matching 1RECV_F0 on rank 1"), std::string::npos) << msg;
}

TEST(PpSchedule, ValidatorNamesAReceiveOnTheWrongRank) {
  Schedule s = make_schedule("1f1b", 2, 1, 2);
  ASSERT_TRUE(erase_action(s, 1, "1RECV_F1"));
  s.ranks[0].push_back(parse_action("1RECV_F1"));
  const std::string msg = joined(validate(s));
  EXPECT_NE(msg.find("rank 0: 1RECV_F1: stage 1 runs on rank 1, not rank 0"), std::string::npos) << msg;
}

TEST(PpSchedule, ValidatorNamesASendBetweenStagesOfOneRank) {
  Schedule s = make_schedule("zb-v", 2, 2, 2);  // stages 1 and 2 are both on rank 1
  s.ranks[1].push_back(parse_action("1SEND_F0"));
  const std::string msg = joined(validate(s));
  EXPECT_NE(msg.find("rank 1: 1SEND_F0: stages 1 and 2 are both on rank 1"), std::string::npos) << msg;
}

TEST(PpSchedule, ValidatorNamesADuplicate) {
  Schedule s = make_schedule("gpipe", 2, 1, 2);
  s.ranks[1].push_back(parse_action("1B1"));
  const std::string msg = joined(validate(s));
  EXPECT_NE(msg.find("rank 1: 1B1: appears more than once"), std::string::npos) << msg;
}

TEST(PpSchedule, ValidatorFindsADeadlock) {
  // Each rank receives before it sends: rank 0 waits for rank 1's gradient before its forward.
  Schedule s;
  s.name = "hand-made";
  s.pp = 2;
  s.microbatches = 1;
  s.stage_rank = {0, 1};
  s.ranks.resize(2);
  for (const char* t : {"0RECV_B0", "0F0", "0SEND_F0", "0B0"}) s.ranks[0].push_back(parse_action(t));
  for (const char* t : {"1RECV_F0", "1F0", "1B0", "1SEND_B0"}) s.ranks[1].push_back(parse_action(t));
  const std::vector<std::string> problems = validate(s);
  ASSERT_EQ(problems.size(), 2u) << joined(problems);
  EXPECT_EQ(problems[0].rfind("deadlock: rank 0 waits at 0RECV_B0", 0), 0u) << problems[0];
  EXPECT_EQ(problems[1].rfind("deadlock: rank 1 waits at 1RECV_F0", 0), 0u) << problems[1];
  // The right order is valid.
  s.ranks[0] = {parse_action("0F0"), parse_action("0SEND_F0"), parse_action("0RECV_B0"), parse_action("0B0")};
  EXPECT_EQ(joined(validate(s)), "");
}

TEST(PpSchedule, ValidatorNamesTooManySlots) {
  const Schedule s = make_schedule("gpipe", 2, 1, 4);
  const std::string msg = joined(validate(s, 2));
  EXPECT_NE(msg.find("rank 0: 0F2: stage 0 has 3 micro-batches in flight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("more than the 2 activation slots allowed"), std::string::npos) << msg;
  EXPECT_EQ(joined(validate(s, 4)), "");
}

TEST(PpSchedule, FilesRoundTripExactly) {
  TempDir d;
  for (const Shape& sh : shapes()) {
    const Schedule s = make_schedule(sh.name, sh.pp, sh.v, sh.m);
    const std::string path = d / (sh.name + ".txt"), text = write_schedule(s);
    write_text(path, text);
    const Schedule back = read_schedule(path);
    EXPECT_EQ(back.name, s.name);
    EXPECT_EQ(back.pp, s.pp);
    EXPECT_EQ(back.virtual_stages, s.virtual_stages);
    EXPECT_EQ(back.microbatches, s.microbatches);
    EXPECT_EQ(back.stage_rank, s.stage_rank);
    EXPECT_EQ(back.ranks, s.ranks);
    EXPECT_EQ(write_schedule(back), text);
  }
}

TEST(PpSchedule, ReadingABadFileNamesFileAndLine) {
  TempDir d;
  const std::string path = d / "list.txt";
  write_text(path, "# mine\nschedule mine\npp 2\nmicrobatches 1\nrank 0: 0F0 0SEND_F0 0Q0\nrank 1: 1RECV_F0\n");
  std::string msg = error_of([&] { read_schedule(path); });
  EXPECT_NE(msg.find(path + ":5: bad pipeline action `0Q0`"), std::string::npos) << msg;

  write_text(path, "pp 2\nmicrobatches 1\nstages 2\n");
  msg = error_of([&] { read_schedule(path); });
  EXPECT_NE(msg.find(path + ":3: unknown line `stages 2`"), std::string::npos) << msg;

  write_text(path, "pp 2\nmicrobatches 1\nrank 0: 0F0\nrank 0: 0B0\n");
  msg = error_of([&] { read_schedule(path); });
  EXPECT_NE(msg.find(path + ":4: rank 0 is listed twice"), std::string::npos) << msg;

  write_text(path, "microbatches 1\nrank 0: 0F0\n");
  msg = error_of([&] { read_schedule(path); });
  EXPECT_NE(msg.find(path + ": no `pp` line"), std::string::npos) << msg;

  // Without stage_rank and schedule lines: stage s on rank s, named by its path; a valid list.
  write_text(path, "pp 2\nmicrobatches 1\nrank 0: 0F0 0SEND_F0 0RECV_B0 0B0\nrank 1: 1RECV_F0 1F0 1B0 1SEND_B0 # ok\n");
  const Schedule s = read_schedule(path);
  EXPECT_EQ(s.name, path);
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1}));
  EXPECT_EQ(joined(validate(s)), "");
}

TEST(PpSchedule, GridShowsActionsBubblesAndSlots) {
  const Schedule s = make_schedule("1f1b", 2, 1, 2);
  const std::string grid = render_grid(s, simulate(s));
  EXPECT_NE(grid.find("rank 0 F0 F1 .  .  B0 B0 .  B1 B1"), std::string::npos) << grid;
  EXPECT_NE(grid.find("rank 1 .  F0 B0 B0 F1 B1 B1"), std::string::npos) << grid;
  EXPECT_NE(grid.find("mean 0.333"), std::string::npos) << grid;
  EXPECT_NE(grid.find("bubble (textbook 1f1b): 0.333"), std::string::npos) << grid;
  EXPECT_NE(grid.find("activation slots per stage: rank 0 2, rank 1 1"), std::string::npos) << grid;
  // Two stages per rank: the second in lower case.
  const Schedule v = make_schedule("zb-v", 2, 2, 2);
  const std::string vgrid = render_grid(v, simulate(v));
  EXPECT_NE(vgrid.find("f0"), std::string::npos) << vgrid;
  EXPECT_NE(vgrid.find("F0"), std::string::npos) << vgrid;
  EXPECT_NE(vgrid.find("whole-rank units"), std::string::npos) << vgrid;
}

TEST(ChromeTrace, WritesEventsPerRank) {
  TempDir d;
  const std::string path = d / "trace.json";
  const Schedule s = make_schedule("1f1b", 2, 1, 2);
  const Simulation sim = simulate(s);
  std::vector<TraceEvent> events;
  for (int r = 0; r < s.pp; ++r)
    for (const TimedAction& t : sim.ranks[r])
      events.push_back({r, "compute", to_string(t.action), t.start * 1e-3, (t.end - t.start) * 1e-3, ""});
  // a second track on rank 1, with arguments; it sorts after compute
  events.push_back({1, "comm dp", "allreduce sum", 0.001, 0.0005, R"({"bytes": 64})"});
  write_chrome_trace(path, events, {{1, "rank 1 (node07)"}}, Json{{"note", "x"}});
  const Json j = parse_json(read_file(path), path);
  EXPECT_EQ(j.at("otherData").at("note"), "x");
  const Json& list = j.at("traceEvents");
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  size_t complete = 0;
  for (const Json& e : list) {
    if (e.at("ph") == "M") {
      if (e.at("name") == "process_name") processes[e.at("pid").get<int>()] = e.at("args").at("name").get<std::string>();
      if (e.at("name") == "thread_name")
        threads[{e.at("pid").get<int>(), e.at("tid").get<int>()}] = e.at("args").at("name").get<std::string>();
      continue;
    }
    ASSERT_EQ(e.at("ph"), "X");
    const TraceEvent& want = events[complete++];
    EXPECT_EQ(e.at("name").get<std::string>(), want.name);
    EXPECT_EQ(e.at("pid").get<int>(), want.rank);
    EXPECT_EQ(threads.at({want.rank, e.at("tid").get<int>()}), want.track);
    EXPECT_NEAR(e.at("ts").get<double>(), want.start_s * 1e6, 1e-6);
    EXPECT_NEAR(e.at("dur").get<double>(), want.dur_s * 1e6, 1e-6);
    if (!want.args.empty()) {
      EXPECT_EQ(e.at("args").at("bytes"), 64);
    }
  }
  EXPECT_EQ(complete, events.size());
  EXPECT_EQ(processes, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1 (node07)"}}));
  EXPECT_EQ(threads, (std::map<std::pair<int, int>, std::string>{{{0, 0}, "compute"}, {{1, 0}, "compute"}, {{1, 1}, "comm dp"}}));
  // 1F1B pp 2: rank 1's first backward (1B0) starts at 2 ms and lasts 2 ms.
  EXPECT_EQ(events[4].name, "1F0");
  EXPECT_NEAR(events[5].start_s, 2e-3, 1e-12);
}
