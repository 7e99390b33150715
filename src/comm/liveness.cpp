// Liveness (see liveness.hpp). Heartbeat value: "<beat count>;<group>=<started op>;…".
#include "comm/liveness.hpp"

#include <sstream>

namespace dtrain {

namespace {

struct Beat {
  int64_t count = -1;
  std::map<std::string, int64_t> started;
};

Beat parse_beat(const std::string& v) {
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

}  // namespace

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

std::string Liveness::encode() {
  std::string v = std::to_string(beats_++);
  for (const auto& [g, s] : started_) v += ";" + g + "=" + std::to_string(s);
  return v;
}

void Liveness::started(const std::string& group, int64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  started_[group] = seq;
}

void Liveness::beat() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    const std::string v = encode();
    lock.unlock();
    try {
      store_->set("hb/" + std::to_string(rank_), v);
    } catch (const std::exception&) {
      // the store is gone (job ending): the failure surfaces in the operations themselves
    }
    lock.lock();
  }
}

std::vector<std::string> Liveness::explain(const std::string& group, int64_t seq, const std::vector<int>& ranks) {
  auto read = [&](int r) -> std::optional<Beat> {
    try {
      if (auto v = store_->try_get("hb/" + std::to_string(r))) return parse_beat(*v);
    } catch (const std::exception&) {
    }
    return std::nullopt;
  };
  // Two readings a few beats apart: a count that did not move is a stopped rank.
  std::map<int, std::optional<Beat>> before;
  for (int r : ranks)
    if (r != rank_) before[r] = read(r);
  const Millis gap = interval_ * 3 + Millis(500);
  std::this_thread::sleep_for(gap);
  std::vector<std::string> out;
  for (auto& [r, b0] : before) {
    const auto b1 = read(r);
    const std::string who = "rank " + std::to_string(r);
    if (!b0 && !b1) {
      out.push_back(who + " never started");
    } else if (!b1 || (b0 && b0->count == b1->count)) {
      out.push_back(who + " stopped (no heartbeat for " + std::to_string(gap.count() / 1000.0).substr(0, 3) +
                    " s: exited, killed or frozen)");
    } else {
      auto it = b1->started.find(group);
      const int64_t at = it == b1->started.end() ? 0 : it->second;
      if (at < seq) out.push_back(who + " has not reached it (at operation #" + std::to_string(at) + ")");
    }
  }
  return out;
}

}  // namespace dtrain
