// Resource samples as JSON: one `resource` record of metrics.jsonl per sample, and the largest
// value of each figure over a run with the rank that had it (summary.json's `resources`).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "metrics/resource_sampler.hpp"

namespace dtrain {

// {"type": "resource", "rank", "host", "step", "t", "cpu_percent", "rss_mb", "threads", "read_mb",
// "write_mb", "gpu_util_percent", "gpu_mem_mb"}: figures that are absent are left out; t is rounded
// to the millisecond, percentages and MiB to 0.1 (read_mb and write_mb to 0.01).
Json to_json(const ResourceSample& s, const std::string& host);
// The figures' names in record order ("cpu_percent", "rss_mb", "threads", "read_mb", "write_mb",
// "gpu_util_percent", "gpu_mem_mb").
std::vector<std::string> resource_figures();

struct ResourcePeak {
  double value = 0.0;
  int rank = 0;
};

// The maximum of each figure over the samples added, and the rank of the sample that had it (the
// first one added, on a tie).
class ResourceMax {
 public:
  void add(const ResourceSample& s);
  int64_t samples() const { return samples_; }
  // The peak of a figure by its record name ("cpu_percent", "rss_mb", "threads", "read_mb",
  // "write_mb", "gpu_util_percent", "gpu_mem_mb"); nullopt when no sample had it.
  std::optional<ResourcePeak> peak(const std::string& figure) const;

 private:
  friend Json to_json(const ResourceMax& m);
  int64_t samples_ = 0;
  std::optional<ResourcePeak> peaks_[7];  // in the order of the names above
};

// {"samples": n, "max": {figure: {"value", "rank"}, ...}} in the records' order, figures no
// sample had left out.
Json to_json(const ResourceMax& m);

}  // namespace dtrain
