// The process's trace buffer (see trace.hpp).
#include "core/trace.hpp"

#include <mutex>
#include <utility>

namespace dtrain {

std::atomic<bool> Trace::on_{false};

namespace {
std::mutex g_mu;
std::vector<TraceSpan> g_spans;
size_t g_dropped = 0;
}  // namespace

void Trace::record(TraceSpan span) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_spans.size() >= kMaxSpans) {
    ++g_dropped;
    return;
  }
  g_spans.push_back(std::move(span));
}

std::vector<TraceSpan> Trace::take() {
  std::lock_guard<std::mutex> lock(g_mu);
  return std::exchange(g_spans, {});
}

size_t Trace::dropped() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_dropped;
}

}  // namespace dtrain
