// JobStop (see job_stop.hpp): the signal handlers, the job's end time, the per-step agreement.
#include "train/job_stop.hpp"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "core/error.hpp"
#include "core/log_level.hpp"

namespace dtrain {

namespace {

// The signals caught, a bit each (lock-free atomics are signal-safe; signals that come together are
// handled on several threads at once, in no order worth reporting).
std::atomic<unsigned> g_caught{0};
static_assert(std::atomic<unsigned>::is_always_lock_free);

void on_stop_signal(int sig) { g_caught.fetch_or(1u << sig); }

// "2026-11-28T16:04:12" (squeue's %e, local time) in seconds since the epoch; none if not a time.
std::optional<int64_t> parse_local_time(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return std::nullopt;
  tm.tm_isdst = -1;
  const std::time_t t = std::mktime(&tm);
  if (t == std::time_t(-1)) return std::nullopt;
  return int64_t(t);
}

std::optional<int64_t> positive_seconds(const char* v) {
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long long s = std::strtoll(v, &end, 10);
  if (*end != '\0' || s <= 0) return std::nullopt;
  return int64_t(s);
}

// The end time squeue reports for the job, or why none.
std::optional<int64_t> squeue_end_time(const std::string& job, std::string* why_not) {
  for (char c : job)
    if (c < '0' || c > '9') return *why_not = "SLURM_JOB_ID " + job + " is not a job number", std::nullopt;
  const std::string cmd = "timeout 30 squeue -h -j " + job + " -o %e 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return *why_not = "squeue could not be started", std::nullopt;
  char line[128] = {0};
  const bool got = std::fgets(line, sizeof line, p) != nullptr;
  const int status = pclose(p);
  std::string text = got ? line : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (status != 0 || text.empty()) return *why_not = "`squeue -j " + job + " -o %e` gave no end time", std::nullopt;
  const std::optional<int64_t> t = parse_local_time(text);
  if (!t) *why_not = "job " + job + " has no end time (squeue says " + text + ")";
  return t;
}

std::string local_clock(int64_t t) {
  const std::time_t tt = std::time_t(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm);
  return b;
}

}  // namespace

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;  // reads and writes in flight go on: a save is not cut short
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_signal_caught() { return g_caught.load() != 0; }

std::string stop_signals_caught() {
  const unsigned caught = g_caught.load();
  std::string names;
  if (caught & (1u << SIGUSR1)) names = "SIGUSR1 (the warning before the job's time limit)";
  if (caught & (1u << SIGTERM))
    names += std::string(names.empty() ? "" : " and ") + "SIGTERM (preemption, or the job's time limit)";
  return names;
}

std::optional<int64_t> job_end_time(std::string* why_not) {
  if (auto t = positive_seconds(std::getenv("DTRAIN_JOB_END_TIME"))) return t;
  if (auto t = positive_seconds(std::getenv("SLURM_JOB_END_TIME"))) return t;
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job || !*job) return *why_not = "not in a SLURM job (and DTRAIN_JOB_END_TIME is not set)", std::nullopt;
  return squeue_end_time(job, why_not);
}

JobStop::JobStop(World& world, double stop_before_minutes) : world_(world), stop_before_minutes_(stop_before_minutes) {
  if (stop_before_minutes <= 0) return;
  int64_t end = 0;
  std::string why_not;
  if (world.rank() == 0) end = job_end_time(&why_not).value_or(0);
  if (world.size() > 1) world.all().broadcast(&end, 1, ElemType::i64, 0);
  const int64_t stop_at = end - int64_t(stop_before_minutes * 60.0);
  const int64_t now = int64_t(std::time(nullptr));
  if (end > 0) deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(stop_at - now);
  if (world.rank() != 0) return;
  if (end <= 0)
    std::printf("note: train.stop_before = %g is set, but %s: the run stops before its end only on SIGUSR1 or "
                "SIGTERM\n", stop_before_minutes, why_not.c_str());
  else if (logs_at(LogLevel::info))
    std::printf("train.stop_before = %g: the job ends at %s, so the run saves and stops after the first step that "
                "ends past %s (in %.1f min)\n", stop_before_minutes, local_clock(end).c_str(),
                local_clock(stop_at).c_str(), double(stop_at - now) / 60.0);
}

JobStop::~JobStop() {
  if (in_flight_) {
    try {
      work_->wait();
    } catch (...) {  // the run failed elsewhere; its error is the one reported
    }
  }
}

bool JobStop::wish() const {
  return stop_signal_caught() || (deadline_ && std::chrono::steady_clock::now() >= *deadline_);
}

void JobStop::start_step() {
  flag_ = wish() ? 1 : 0;
  if (world_.size() == 1) return;
  work_ = world_.all().allreduce_async(&flag_, 1, ElemType::i64, ReduceOp::max);
  in_flight_ = true;
}

bool JobStop::agreed() {
  if (in_flight_) work_->wait();
  in_flight_ = false;
  return flag_ != 0;
}

bool JobStop::asked_before_start() {
  flag_ = wish() ? 1 : 0;
  if (world_.size() > 1) world_.all().allreduce(&flag_, 1, ReduceOp::max);
  return flag_ != 0;
}

std::string JobStop::reason() const {
  if (stop_signal_caught()) return stop_signals_caught();
  if (deadline_ && std::chrono::steady_clock::now() >= *deadline_) {
    char b[96];
    std::snprintf(b, sizeof b, "train.stop_before: %g min before the job's end", stop_before_minutes_);
    return b;
  }
  return "another rank's signal or deadline";
}

}  // namespace dtrain
