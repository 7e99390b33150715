// simulate(): a schedule's timeline on an ideal machine (durations per action, a fixed delay per
// message), and render_grid(): that timeline as a time × rank grid with its bubbles and slots;
// parse_action_costs(): the costs `dtrain plan --costs` gives it.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <tuple>

#include "core/error.hpp"
#include "parallel/pp/schedule_detail.hpp"

namespace dtrain {

namespace {

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// "1", "1.5": a cost as short text.
std::string number(double x) {
  std::string t = fixed(x, 3);
  while (t.back() == '0') t.pop_back();
  if (t.back() == '.') t.pop_back();
  return t;
}

}  // namespace

double ActionCosts::of(Op op, int stage) const {
  if (stage >= 0 && size_t(stage) < stages.size()) {
    const StageCosts& s = stages[size_t(stage)];
    return op == Op::F ? s.F : op == Op::B ? s.B : op == Op::I ? s.I : s.W;
  }
  return op == Op::F ? F : op == Op::B ? B : op == Op::I ? I : W;
}

ActionCosts parse_action_costs(const std::string& text) {
  ActionCosts c;
  std::vector<StageCosts> groups;
  size_t from = 0;
  while (from <= text.size()) {
    const size_t semi = std::min(text.find(';', from), text.size());
    const std::string group = text.substr(from, semi - from);
    std::vector<double> v;
    size_t at = 0;
    while (at <= group.size()) {
      const size_t comma = std::min(group.find(',', at), group.size());
      const std::string part = group.substr(at, comma - at);
      char* end = nullptr;
      const double x = std::strtod(part.c_str(), &end);
      require(!part.empty() && *end == 0 && std::isfinite(x) && x >= 0,
              "--costs " + text + ": `" + part +
                  "` is not a duration: give F,B,I,W (and optionally COMM) as numbers >= 0, e.g. --costs 1,2,1,1, "
                  "or one F,B,I,W per stage joined by ';'");
      v.push_back(x);
      at = comma + 1;
    }
    require(v.size() == 4 || v.size() == 5, "--costs " + text + ": `" + group + "` has " + std::to_string(v.size()) +
                                                " numbers: give F,B,I,W or F,B,I,W,COMM");
    groups.push_back({v[0], v[1], v[2], v[3]});
    if (v.size() == 5) c.comm = v[4];
    from = semi + 1;
  }
  c.F = groups[0].F;
  c.B = groups[0].B;
  c.I = groups[0].I;
  c.W = groups[0].W;
  if (groups.size() > 1) c.stages = groups;
  return c;
}

namespace pp_detail {

Replay replay(const Schedule& s, const ActionCosts& costs) {
  Replay p;
  p.ranks.assign(s.pp, {});
  p.pos.assign(s.pp, 0);
  p.clock.assign(s.pp, 0.0);
  p.busy.assign(s.pp, 0.0);
  std::map<std::tuple<bool, int, int>, double> arrival;  // (backward, sending stage, micro) → time
  bool moved = true;
  while (moved) {
    moved = false;
    for (int r = 0; r < s.pp; ++r) {
      const auto& list = s.ranks[r];
      while (p.pos[r] < list.size()) {
        const Action& a = list[p.pos[r]];
        if (a.op == Op::RECV_F || a.op == Op::RECV_B) {
          const bool backward = a.op == Op::RECV_B;
          auto it = arrival.find({backward, backward ? a.stage + 1 : a.stage - 1, a.micro});
          if (it == arrival.end()) break;  // its sender has not got there yet
          p.clock[r] = std::max(p.clock[r], it->second);
        } else if (a.op == Op::SEND_F || a.op == Op::SEND_B) {
          arrival[{a.op == Op::SEND_B, a.stage, a.micro}] = p.clock[r] + costs.comm;
        } else {
          const double d = costs.of(a.op, a.stage);
          p.ranks[r].push_back({a, p.clock[r], p.clock[r] + d});
          p.clock[r] += d;
          p.busy[r] += d;
        }
        ++p.pos[r];
        moved = true;
      }
    }
  }
  return p;
}

}  // namespace pp_detail

Simulation simulate(const Schedule& s, const ActionCosts& costs) {
  pp_detail::Replay p = pp_detail::replay(s, costs);
  const std::vector<size_t>& pos = p.pos;
  const std::vector<double>&clock = p.clock, &busy = p.busy;
  Simulation sim;
  sim.ranks = std::move(p.ranks);
  for (int r = 0; r < s.pp; ++r)
    require(pos[r] == s.ranks[r].size(), "schedule " + s.name + " cannot be simulated: rank " + std::to_string(r) +
                                             " waits forever at " + to_string(s.ranks[r][pos[r]]) +
                                             "; run validate() on it and fix what it reports");
  for (int r = 0; r < s.pp; ++r) sim.makespan = std::max(sim.makespan, clock[r]);
  sim.bubble.assign(s.pp, 0.0);
  for (int r = 0; r < s.pp; ++r) {
    sim.bubble[r] = sim.makespan > 0 ? (sim.makespan - busy[r]) / sim.makespan : 0.0;
    sim.mean_bubble += sim.bubble[r] / s.pp;
  }
  return sim;
}

namespace {

// The grid's column width in time units (1, or finer when durations are fractions) and its columns
// (at most 400).
struct GridScale {
  double unit = 1.0;
  int columns = 0;
};

GridScale grid_scale(const Simulation& sim) {
  GridScale g;
  auto fits = [&](double u) {
    for (const auto& list : sim.ranks)
      for (const TimedAction& t : list)
        for (double x : {t.start, t.end})
          if (std::fabs(x / u - std::round(x / u)) > 1e-6) return false;
    return true;
  };
  for (double u : {1.0, 0.5, 0.25, 0.2, 0.1})
    if (fits(u)) {
      g.unit = u;
      break;
    }
  g.columns = int(std::ceil(sim.makespan / g.unit - 1e-9));
  if (g.columns > 400) {
    g.unit = sim.makespan / 400;
    g.columns = 400;
  }
  return g;
}

// A cell's label: op and micro-batch; with two stages per rank the second in lower case, with more
// a ".c" suffix naming the rank's stage (0 = its first).
std::string cell_label(const Schedule& s, const Action& a, int rank) {
  std::string op = op_name(a.op), text;
  const std::vector<int> mine = s.stages_of(rank);
  const int chunk = int(std::find(mine.begin(), mine.end(), a.stage) - mine.begin());
  if (s.virtual_stages == 2 && chunk == 1)
    for (char& ch : op) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  text = op + std::to_string(a.micro);
  if (s.virtual_stages > 2) text += "." + std::to_string(chunk);
  return text;
}

// A time ruler: the time at every 5th column (or further apart where the labels are wider), past
// a margin as wide as the rank names.
std::string time_ruler(size_t margin, const GridScale& g, size_t width) {
  std::string ruler(margin, ' ');
  for (int col = 0; col < g.columns; col += 5) {
    const size_t at = margin + 1 + size_t(col) * (width + 1);
    if (ruler.size() + (ruler.size() > margin ? 1 : 0) > at) continue;
    ruler.resize(at, ' ');
    ruler += number(col * g.unit);
  }
  return ruler;
}

// Rank r's row: its name, then a label (or "." when idle) per column, each `width` wide.
std::string rank_row(const Schedule& s, const Simulation& sim, int r, const GridScale& g, size_t margin,
                     size_t width) {
  std::vector<std::string> cells(g.columns, ".");
  for (const TimedAction& t : sim.ranks[r]) {
    const int a = int(std::round(t.start / g.unit)), b = std::max(a + 1, int(std::round(t.end / g.unit)));
    for (int col = a; col < b && col < g.columns; ++col) cells[col] = cell_label(s, t.action, r);
  }
  std::string line = "rank " + std::to_string(r);
  line.resize(margin, ' ');
  for (const std::string& cell : cells) {
    line += ' ';
    line += cell;
    line.append(width - cell.size(), ' ');
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

// The lines under the grid: bubbles (simulated and textbook) and activation slots per rank.
std::string grid_summary(const Schedule& s, const Simulation& sim) {
  std::string out = "bubble (simulated):";
  for (int r = 0; r < s.pp; ++r) out += " rank " + std::to_string(r) + " " + fixed(sim.bubble[r], 3) + ",";
  out += " mean " + fixed(sim.mean_bubble, 3) + "\n";
  const double theory = theoretical_bubble(s.name, s.pp, s.virtual_stages, s.microbatches);
  if (theory >= 0)
    out += "bubble (textbook " + s.name + (s.name.rfind("zb-", 0) == 0 ? ", when F = I = W" : "") +
           "): " + fixed(theory, 3) + "\n";
  const std::vector<int> slots = s.slots(), peak = s.peak_in_flight();
  out += "activation slots per stage:";
  for (int r = 0; r < s.pp; ++r) out += " rank " + std::to_string(r) + " " + std::to_string(slots[r]) + ",";
  out.pop_back();
  out += "\n";
  if (s.virtual_stages > 1) {
    out += "activations in flight (whole-rank units):";
    for (int r = 0; r < s.pp; ++r)
      out += " rank " + std::to_string(r) + " " + number(double(peak[r]) / s.virtual_stages) + ",";
    out.pop_back();
    out += "\n";
  }
  return out;
}

}  // namespace

std::string render_grid(const Schedule& s, const Simulation& sim) {
  const GridScale g = grid_scale(sim);
  size_t width = 2;
  for (int r = 0; r < s.pp; ++r)
    for (const TimedAction& t : sim.ranks[r]) width = std::max(width, cell_label(s, t.action, r).size());
  const size_t margin = ("rank " + std::to_string(s.pp - 1)).size();

  std::string out = "schedule " + s.name + ": pp " + std::to_string(s.pp) + ", virtual " +
                    std::to_string(s.virtual_stages) + ", micro-batches " + std::to_string(s.microbatches) + "; " +
                    number(sim.makespan) + " time units, one column = " + number(g.unit) + "\n";
  out += time_ruler(margin, g, width) + "\n";
  for (int r = 0; r < s.pp; ++r) out += rank_row(s, sim, r, g, margin, width) + "\n";
  return out + grid_summary(s, sim);
}

}  // namespace dtrain
