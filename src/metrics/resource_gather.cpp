// gather_resource_samples (see resource_gather.hpp).
#include "metrics/resource_gather.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>


namespace dtrain {

namespace {

// A sample as doubles: rank, t, step, then the optional figures, NaN for one that is absent.
constexpr size_t kDoubles = 10;

double or_nan(const std::optional<double>& v) { return v ? *v : std::numeric_limits<double>::quiet_NaN(); }
std::optional<double> from_nan(double v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); }

void encode(const ResourceSample& s, double* out) {
  out[0] = double(s.rank);
  out[1] = s.t;
  out[2] = double(s.step);  // exact below 2^53
  out[3] = or_nan(s.cpu_percent);
  out[4] = or_nan(s.rss_mb);
  out[5] = s.threads ? double(*s.threads) : std::numeric_limits<double>::quiet_NaN();
  out[6] = or_nan(s.read_mb);
  out[7] = or_nan(s.write_mb);
  out[8] = or_nan(s.gpu_util_percent);
  out[9] = or_nan(s.gpu_mem_mb);
}

ResourceSample decode(const double* in) {
  ResourceSample s;
  s.rank = int(in[0]);
  s.t = in[1];
  s.step = int64_t(in[2]);
  s.cpu_percent = from_nan(in[3]);
  s.rss_mb = from_nan(in[4]);
  if (!std::isnan(in[5])) s.threads = int(in[5]);
  s.read_mb = from_nan(in[6]);
  s.write_mb = from_nan(in[7]);
  s.gpu_util_percent = from_nan(in[8]);
  s.gpu_mem_mb = from_nan(in[9]);
  return s;
}

}  // namespace

std::vector<ResourceSample> gather_resource_samples(ProcessGroup& all, const std::vector<ResourceSample>& mine) {
  const size_t ranks = size_t(all.size());
  int64_t my_count = int64_t(mine.size());
  std::vector<int64_t> counts(ranks);
  all.allgather(&my_count, counts.data(), 1, ElemType::i64);

  std::vector<size_t> doubles(ranks);
  size_t total = 0;
  for (size_t r = 0; r < ranks; ++r) {
    doubles[r] = size_t(counts[r]) * kDoubles;
    total += doubles[r];
  }
  if (total == 0) return {};  // every rank knows it: none goes on to the second collective

  std::vector<double> in(mine.size() * kDoubles), out(total);
  for (size_t i = 0; i < mine.size(); ++i) encode(mine[i], in.data() + i * kDoubles);
  all.allgather_async(in.data(), out.data(), doubles, ElemType::f64)->wait();

  std::vector<ResourceSample> samples(total / kDoubles);
  for (size_t i = 0; i < samples.size(); ++i) samples[i] = decode(out.data() + i * kDoubles);
  return samples;
}

}  // namespace dtrain
