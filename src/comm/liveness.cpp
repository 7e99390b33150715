// Liveness (see liveness.hpp). Heartbeat value: "<beat count>;<group>=<started op>;…". Ranks are
// on different machines, so a heartbeat's age is measured on the observer's clock: the time since
// it first read the count it still reads (counts only grow).
#include "comm/liveness.hpp"

#include <cstdio>
#include <set>
#include <sstream>

namespace dtrain {

Liveness::Liveness(std::shared_ptr<Store> store, int global_rank, Millis interval)
    : store_(std::move(store)), rank_(global_rank), interval_(interval) {
  store_->set("hb/" + std::to_string(rank_), encode());
  thread_ = std::thread([this] { beat(); });
}

Liveness::~Liveness() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Liveness::Beat Liveness::parse(const std::string& v) {
  Beat b;
  std::stringstream ss(v);
  std::string item;
  bool first = true;
  while (std::getline(ss, item, ';')) {
    if (first) {
      b.count = std::atoll(item.c_str());
      first = false;
      continue;
    }
    auto eq = item.rfind('=');
    if (eq != std::string::npos) b.started[item.substr(0, eq)] = std::atoll(item.c_str() + eq + 1);
  }
  return b;
}

std::string Liveness::encode() {
  std::string v = std::to_string(beats_++);
  for (const auto& [g, s] : started_) v += ";" + g + "=" + std::to_string(s);
  return v;
}

void Liveness::started(const std::string& group, int64_t seq, const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lock(mu_);
  started_[group] = seq;
  outstanding_[group] = Outstanding{ranks, Clock::now()};
}

void Liveness::finished(const std::string& group) {
  std::lock_guard<std::mutex> lock(mu_);
  outstanding_.erase(group);
}

void Liveness::beat() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    const std::string v = encode();
    // Operations outstanding for a beat or more (a quick one costs no reads): watch their ranks.
    std::set<int> watch;
    const auto now = Clock::now();
    for (const auto& [group, op] : outstanding_)
      if (now - op.since >= interval_) watch.insert(op.ranks.begin(), op.ranks.end());
    watch.erase(rank_);
    lock.unlock();
    try {
      store_->set("hb/" + std::to_string(rank_), v);
    } catch (const std::exception&) {
      // the store is gone (job ending): the failure surfaces in the operations themselves
    }
    for (int r : watch) observe(r);
    lock.lock();
  }
}

std::optional<Liveness::Beat> Liveness::observe(int rank) {
  std::optional<Beat> b;
  try {
    if (auto v = store_->try_get("hb/" + std::to_string(rank))) b = parse(*v);
  } catch (const std::exception&) {
  }
  if (!b) return b;
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(seen_mu_);
  Seen& s = seen_[rank];
  if (!s.known || s.count != b->count) {
    s.tight = s.known && now - s.last_read <= interval_ * 2;
    s.known = true;
    s.count = b->count;
    s.since = now;
  }
  s.last_read = now;
  return b;
}

std::vector<std::string> Liveness::explain(const std::string& group, int64_t seq, const std::vector<int>& ranks) {
  // Two readings a few beats apart: a count that did not move is a stopped rank.
  std::map<int, std::optional<Beat>> before;
  for (int r : ranks)
    if (r != rank_) before[r] = observe(r);
  const Millis gap = interval_ * 3 + Millis(500);
  std::this_thread::sleep_for(gap);
  std::vector<std::string> out;
  for (auto& [r, b0] : before) {
    const auto b1 = observe(r);
    const std::string who = "rank " + std::to_string(r);
    if (!b0 && !b1) {
      out.push_back(who + " never started");
    } else if (!b1 || (b0 && b0->count == b1->count)) {
      double secs = std::chrono::duration<double>(gap).count();
      bool tight = false;
      {
        std::lock_guard<std::mutex> lock(seen_mu_);
        const Seen& s = seen_[r];
        if (s.known) {
          secs = std::max(secs, std::chrono::duration<double>(Clock::now() - s.since).count());
          tight = s.tight;
        }
      }
      char age[64];
      std::snprintf(age, sizeof age, "%s%.1f s", tight ? "" : "at least ", secs);
      out.push_back(who + " stopped (no heartbeat for " + age + ": exited, killed or frozen)");
    } else {
      auto it = b1->started.find(group);
      const int64_t at = it == b1->started.end() ? 0 : it->second;
      if (at < seq) out.push_back(who + " has not reached it (at operation #" + std::to_string(at) + ")");
    }
  }
  return out;
}

}  // namespace dtrain
