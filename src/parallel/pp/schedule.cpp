// Pipeline schedules as data: the action notation, what a Schedule says about itself (stages,
// activation slots), the textbook bubbles, and the text file form (write_schedule / read_schedule).
#include "parallel/pp/schedule.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "parallel/pp/schedule_detail.hpp"

namespace dtrain {

namespace {

constexpr Op kOps[] = {Op::F, Op::B, Op::I, Op::W, Op::SEND_F, Op::RECV_F, Op::SEND_B, Op::RECV_B};

// A whole non-negative number, or -1.
int parse_count(const std::string& text) {
  if (text.empty() || text.size() > 9) return -1;
  for (char ch : text)
    if (!std::isdigit(static_cast<unsigned char>(ch))) return -1;
  return std::atoi(text.c_str());
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// Per rank, its per-stage and total in-flight peaks (F counted in, B or W counted out).
void in_flight_peaks(const Schedule& s, std::vector<int>& per_stage, std::vector<int>& total) {
  const bool split = s.split_backward();
  per_stage.assign(s.pp, 0);
  total.assign(s.pp, 0);
  for (int r = 0; r < s.pp && r < int(s.ranks.size()); ++r) {
    std::map<int, int> count;
    int sum = 0;
    for (const Action& a : s.ranks[r]) {
      if (a.op == Op::F) {
        per_stage[r] = std::max(per_stage[r], ++count[a.stage]);
        total[r] = std::max(total[r], ++sum);
      } else if (a.op == (split ? Op::W : Op::B)) {
        --count[a.stage];
        --sum;
      }
    }
  }
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::F:
      return "F";
    case Op::B:
      return "B";
    case Op::I:
      return "I";
    case Op::W:
      return "W";
    case Op::SEND_F:
      return "SEND_F";
    case Op::RECV_F:
      return "RECV_F";
    case Op::SEND_B:
      return "SEND_B";
    case Op::RECV_B:
      return "RECV_B";
  }
  return "?";
}

std::string to_string(const Action& a) { return std::to_string(a.stage) + op_name(a.op) + std::to_string(a.micro); }

Action parse_action(const std::string& token) {
  auto bad = [&token]() {
    return Error("bad pipeline action `" + token +
                 "`: write STAGE OP MICRO-BATCH, e.g. 0F1 or 1SEND_F0, with OP one of F, B, I, W, SEND_F, RECV_F, "
                 "SEND_B, RECV_B");
  };
  size_t i = 0;
  while (i < token.size() && std::isdigit(static_cast<unsigned char>(token[i]))) ++i;
  size_t j = i;
  while (j < token.size() && (std::isupper(static_cast<unsigned char>(token[j])) || token[j] == '_')) ++j;
  const int stage = parse_count(token.substr(0, i)), micro = parse_count(token.substr(j));
  if (stage < 0 || micro < 0 || j == i) throw bad();
  const std::string op = token.substr(i, j - i);
  for (Op o : kOps)
    if (op == op_name(o)) return {o, stage, micro};
  throw bad();
}

std::vector<int> Schedule::stages_of(int rank) const {
  std::vector<int> out;
  for (int s = 0; s < int(stage_rank.size()); ++s)
    if (stage_rank[s] == rank) out.push_back(s);
  return out;
}

bool Schedule::split_backward() const {
  for (const auto& list : ranks)
    for (const Action& a : list)
      if (a.op == Op::I) return true;
  return false;
}

std::vector<int> Schedule::slots() const {
  std::vector<int> per_stage, total;
  in_flight_peaks(*this, per_stage, total);
  return per_stage;
}

std::vector<int> Schedule::peak_in_flight() const {
  std::vector<int> per_stage, total;
  in_flight_peaks(*this, per_stage, total);
  return total;
}

double theoretical_bubble(const std::string& name, int pp, int v, int m) {
  const double p = pp, mm = m;
  if (pp < 1 || m < 1) return -1.0;
  if (name == "gpipe" || name == "1f1b") return (p - 1) / (mm + p - 1);
  if (name == "interleaved-1f1b") return (p - 1) / (v * mm + p - 1);
  // ZB-H1 idles (p-1)(F+I-W) of a step of 3m units when F = I = W (1F1B: (p-1)(F+B) of 3m).
  if (name == "zb-h1") return (p - 1) / (3 * mm + p - 1);
  // ZB-V: only the first forward's way down the V (p-1 half-stage forwards) of 6m half-stage units.
  if (name == "zb-v") return (p - 1) / (6 * mm + p - 1);
  return -1.0;
}

std::string write_schedule(const Schedule& s) {
  std::ostringstream o;
  o << "# dtrain pipeline schedule: one line per rank, actions in order (STAGE OP MICRO-BATCH)\n";
  o << "schedule " << s.name << "\n";
  o << "pp " << s.pp << "\nvirtual " << s.virtual_stages << "\nmicrobatches " << s.microbatches << "\n";
  o << "stage_rank";
  for (int r : s.stage_rank) o << ' ' << r;
  o << "\n";
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    o << "rank " << r << ":";
    for (const Action& a : s.ranks[r]) o << ' ' << to_string(a);
    o << "\n";
  }
  return o.str();
}

void check_schedule_shape(int pp, int v, int m, const std::string& where) {
  auto within = [&](const char* what, int value, int most, const char* fix) {
    require(value >= 1 && value <= most, where + ": " + what + " " + std::to_string(value) + " is outside 1.." +
                                             std::to_string(most) + ": " + fix);
  };
  within("pp", pp, kMaxPipelineRanks, "give the pipeline ranks");
  within("virtual stages", v, kMaxVirtualStages, "give the stages per rank (2 for interleaved-1f1b and zb-v)");
  within("micro-batches", m, kMaxMicrobatches, "give the micro-batches per pass (a few times pp is plenty)");
  const int64_t pairs = int64_t(pp) * v * m;
  require(pairs <= kMaxStageMicrobatches,
          where + ": pp " + std::to_string(pp) + " × virtual " + std::to_string(v) + " × micro-batches " +
              std::to_string(m) + " = " + std::to_string(pairs) + " stage passes, more than the " +
              std::to_string(kMaxStageMicrobatches) + " a schedule may hold: use fewer micro-batches");
}

namespace {

// A schedule file as read so far, line by line; finish() checks it whole and returns the schedule.
class ScheduleFileReader {
 public:
  explicit ScheduleFileReader(const std::string& path) : path_(path) { s_.name = path; }

  void read_line(const std::string& raw, int line_no) {
    std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) return;
    if (line.rfind("rank", 0) == 0 && line.find(':') != std::string::npos) return read_rank_line(line, line_no);
    read_setting(line, line_no);
  }

  Schedule finish() && {
    for (const char* key : {"pp", "microbatches"})
      if (!key_line_.count(key)) throw Error(path_ + ": no `" + key + "` line: add one, e.g. `" + key + " 4`");
    check_schedule_shape(s_.pp, s_.virtual_stages, s_.microbatches, path_);
    check_stage_rank();
    s_.ranks.assign(s_.pp, {});
    for (auto& [r, list] : rank_lists_) {
      if (r >= s_.pp)
        fail(rank_line_[r], "rank " + std::to_string(r) + " but pp is " + std::to_string(s_.pp) + ": use ranks 0 to " +
                                std::to_string(s_.pp - 1));
      s_.ranks[r] = std::move(list);
    }
    for (int r = 0; r < s_.pp; ++r)
      if (!rank_lists_.count(r))
        throw Error(path_ + ": no line for rank " + std::to_string(r) + ": add `rank " + std::to_string(r) + ": ...`");
    return std::move(s_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(path_ + ":" + std::to_string(line) + ": " + what);
  }

  // `rank R: 0F0 0SEND_F0 ...`
  void read_rank_line(const std::string& line, int line_no) {
    const size_t colon = line.find(':');
    const int r = parse_count(trim(line.substr(4, colon - 4)));
    if (r < 0) fail(line_no, "bad rank line: write `rank R: 0F0 0SEND_F0 ...`");
    if (rank_lists_.count(r)) fail(line_no, "rank " + std::to_string(r) + " is listed twice: give each rank one line");
    std::vector<Action>& list = rank_lists_[r];
    rank_line_[r] = line_no;
    std::istringstream tokens(line.substr(colon + 1));
    std::string tok;
    while (tokens >> tok) {
      try {
        list.push_back(parse_action(tok));
      } catch (const Error& e) {
        fail(line_no, e.what());
      }
    }
  }

  // `KEY VALUE`: schedule, pp, virtual, microbatches or stage_rank, each at most once.
  void read_setting(const std::string& line, int line_no) {
    const size_t sp = line.find_first_of(" \t");
    const std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : trim(line.substr(sp));
    if (key_line_.count(key)) fail(line_no, "`" + key + "` is given twice: keep one");
    key_line_[key] = line_no;
    if (key == "schedule") {
      if (value.empty()) fail(line_no, "`schedule` needs a name, e.g. `schedule 1f1b`");
      s_.name = value;
    } else if (key == "pp" || key == "virtual" || key == "microbatches") {
      const int n = parse_count(value);
      if (n < 1) fail(line_no, "`" + key + " " + value + "`: give a whole number of at least 1");
      (key == "pp" ? s_.pp : key == "virtual" ? s_.virtual_stages : s_.microbatches) = n;
    } else if (key == "stage_rank") {
      std::istringstream vals(value);
      std::string tok;
      while (vals >> tok) {
        const int r = parse_count(tok);
        if (r < 0) fail(line_no, "stage_rank `" + tok + "` is not a rank: list the rank of each stage, e.g. 0 1 2 3");
        s_.stage_rank.push_back(r);
      }
    } else {
      fail(line_no,
           "unknown line `" + line + "`: use schedule, pp, virtual, microbatches, stage_rank or `rank R: ...`");
    }
  }

  // stage_rank as given (or the default: stage s on rank s % pp) names a rank for every stage.
  void check_stage_rank() {
    if (!key_line_.count("stage_rank"))  // one stage per rank, or a loop
      for (int st = 0; st < s_.stages(); ++st) s_.stage_rank.push_back(st % s_.pp);
    if (int(s_.stage_rank.size()) != s_.stages())
      fail(key_line_["stage_rank"], "stage_rank lists " + std::to_string(s_.stage_rank.size()) +
                                        " stages but pp × virtual = " + std::to_string(s_.stages()) +
                                        ": give one rank per stage");
    for (int r : s_.stage_rank)
      if (r >= s_.pp)
        fail(key_line_["stage_rank"], "stage_rank names rank " + std::to_string(r) + " but pp is " +
                                          std::to_string(s_.pp) + ": use ranks 0 to " + std::to_string(s_.pp - 1));
  }

  std::string path_;
  Schedule s_;
  std::map<std::string, int> key_line_;            // the line each setting is on
  std::map<int, std::vector<Action>> rank_lists_;  // by rank
  std::map<int, int> rank_line_;                   // the line each rank's list is on
};

}  // namespace

Schedule read_schedule(const std::string& path) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  require(ec || bytes <= (64u << 20), path + " is " + std::to_string(bytes >> 20) +
                                          " MiB, more than any schedule's lists: give a schedule file "
                                          "(`dtrain plan --save` writes one)");
  const std::string text = read_file(path, kMaxSmallFileBytes, "schedule file");
  ScheduleFileReader reader(path);
  std::istringstream in(text);
  std::string raw;
  for (int line_no = 1; std::getline(in, raw); ++line_no) reader.read_line(raw, line_no);
  return std::move(reader).finish();
}

}  // namespace dtrain
