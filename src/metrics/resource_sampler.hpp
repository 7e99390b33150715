// ResourceSampler: a background thread that samples this process's CPU use, resident memory,
// threads, storage I/O and (through a probe) its GPU every N seconds, for the `resource` records.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/device_usage.hpp"

namespace dtrain {

// One rank's figures at one moment. A figure that could not be read is nullopt (left out of its
// record): /proc/self/io is closed to some containers, the GPU figures need a GPU with NVML.
struct ResourceSample {
  int rank = 0;
  double t = 0.0;    // seconds since the run started, on rank 0's clock (the sampler's clock)
  int64_t step = 0;  // the step the trainer last set (set_step)
  // User + system CPU time of the process over the wall time since the previous sample; 100 = one core.
  std::optional<double> cpu_percent;
  std::optional<double> rss_mb;  // resident memory (VmRSS), MiB
  std::optional<int> threads;    // threads of the process
  std::optional<double> read_mb, write_mb;  // storage read and written since the process started, MiB
  std::optional<double> gpu_util_percent;   // the GPU's busy share over its last sample period
  std::optional<double> gpu_mem_mb;         // memory in use on the GPU (every process's), MiB
};

class ResourceSampler {
 public:
  using Clock = std::function<double()>;                         // the sample's "t"
  using GpuProbe = std::function<std::optional<DeviceUsage>()>;  // e.g. ComputeDevice::usage(); must not throw

  // Starts the thread, which takes its first sample at once and then one every interval_s seconds
  // (> 0; Error otherwise). `t` is called on the sampler's thread; without `gpu` there are no GPU
  // figures. Throws ResourceExhausted when the thread cannot start.
  ResourceSampler(double interval_s, int rank, Clock t, GpuProbe gpu = nullptr);
  // Stops the thread at once (it waits on a condition variable, not in a sleep).
  ~ResourceSampler();
  ResourceSampler(const ResourceSampler&) = delete;
  ResourceSampler& operator=(const ResourceSampler&) = delete;

  // The step the next samples carry; the trainer calls it every step (one relaxed atomic store).
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  // The samples the thread took since the previous take(), oldest first (they accumulate until
  // taken). Rethrows what ended the thread when a callback threw.
  std::vector<ResourceSample> take();
  // A sample taken now on the caller's thread, not queued (the thread's next sample measures its CPU
  // use from this one). The first sample of a sampler measures CPU use since the process started;
  // a sample less than 0.1 s after the previous one has no cpu_percent (clock ticks are 10 ms) and
  // leaves the next one to measure from the previous.
  ResourceSample sample_now();

 private:
  void run();

  const std::chrono::steady_clock::duration interval_;
  const int rank_;
  const Clock t_;
  const GpuProbe gpu_;
  std::atomic<int64_t> step_{0};

  std::mutex sample_mu_;  // sample_now's state
  std::optional<double> prev_cpu_s_;
  std::chrono::steady_clock::time_point prev_wall_{};

  std::mutex mu_;  // what the thread shares with the caller
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<ResourceSample> pending_;
  std::exception_ptr error_;  // what a callback threw on the thread (it stopped sampling)
  std::thread thread_;
};

}  // namespace dtrain
