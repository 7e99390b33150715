// ResourceSampler (see resource_sampler.hpp): figures from /proc/self and the GPU probe, taken on a
// thread that waits on a condition variable between samples.
#include "metrics/resource_sampler.hpp"

#include <unistd.h>

#include <algorithm>
#include <system_error>

#include "core/error.hpp"
#include "core/limits.hpp"
#include "metrics/proc_stats.hpp"

namespace dtrain {

namespace {

using SteadyClock = std::chrono::steady_clock;

// Shortest wall time over which CPU time (counted in 10 ms clock ticks) is turned into a percentage.
constexpr double kMinCpuSpan = 0.1;

SteadyClock::duration interval_of(double seconds) {
  require(seconds > 0 && seconds <= 1e7,
          "the resource sampler's interval is " + std::to_string(seconds) +
              " seconds: give a positive number of seconds up to 10^7 (train.sample_every_s; 0 turns sampling off)");
  return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

ResourceSampler::ResourceSampler(double interval_s, int rank, Clock t, GpuProbe gpu)
    : interval_(interval_of(interval_s)), rank_(rank), t_(std::move(t)), gpu_(std::move(gpu)) {
  DT_ASSERT(t_);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error&) {
    throw thread_start_failed("the resource sampler's thread", "set train.sample_every_s = 0, or raise the limit");
  }
}

ResourceSampler::~ResourceSampler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<ResourceSample> ResourceSampler::take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
  std::vector<ResourceSample> out;
  out.swap(pending_);
  return out;
}

void ResourceSampler::run() {
  auto next = SteadyClock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    std::optional<ResourceSample> s;
    std::exception_ptr error;
    try {
      s = sample_now();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      error_ = error;
      return;
    }
    pending_.push_back(*s);
    // The next sample one interval after this one's due time, or now when that has passed (a
    // process that was stopped does not take the missed samples in a burst).
    next = std::max(next + interval_, SteadyClock::now());
    cv_.wait_until(lock, next, [this] { return stop_; });
  }
}

ResourceSample ResourceSampler::sample_now() {
  ResourceSample s;
  s.rank = rank_;
  s.step = step_.load(std::memory_order_relaxed);
  s.t = t_();

  const double ticks_per_s = double(::sysconf(_SC_CLK_TCK));
  const auto now = SteadyClock::now();
  std::optional<ProcCpuTicks> cpu;
  if (const auto text = read_proc_file("/proc/self/stat")) cpu = parse_proc_stat(*text);
  if (cpu && ticks_per_s > 0) {
    const double cpu_s = double(cpu->user + cpu->system) / ticks_per_s;
    std::lock_guard<std::mutex> lock(sample_mu_);
    if (prev_cpu_s_) {
      const double wall = std::chrono::duration<double>(now - prev_wall_).count();
      if (wall >= kMinCpuSpan) {
        s.cpu_percent = 100.0 * (cpu_s - *prev_cpu_s_) / wall;
        prev_cpu_s_ = cpu_s;
        prev_wall_ = now;
      }
    } else {
      std::optional<double> uptime;
      if (const auto text = read_proc_file("/proc/uptime")) uptime = parse_proc_uptime(*text);
      const double alive = uptime ? *uptime - double(cpu->start) / ticks_per_s : 0.0;
      if (alive >= kMinCpuSpan) s.cpu_percent = 100.0 * cpu_s / alive;
      prev_cpu_s_ = cpu_s;
      prev_wall_ = now;
    }
  }

  if (const auto text = read_proc_file("/proc/self/status")) {
    const ProcStatus status = parse_proc_status(*text);
    s.rss_mb = status.rss_mb;
    s.threads = status.threads;
  }
  if (const auto text = read_proc_file("/proc/self/io")) {
    if (const auto io = parse_proc_io(*text)) {
      s.read_mb = io->read_mb;
      s.write_mb = io->write_mb;
    }
  }
  if (gpu_) {
    if (const auto usage = gpu_()) {
      s.gpu_util_percent = usage->util_percent;
      s.gpu_mem_mb = usage->mem_used_mb;
    }
  }
  return s;
}

}  // namespace dtrain
