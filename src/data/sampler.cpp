// Per-rank sample order: Fisher-Yates over Philox bits keyed by (seed, epoch), padded or truncated
// to a multiple of the replica count, then strided by rank.
#include "data/sampler.hpp"

#include <numeric>

#include "core/error.hpp"
#include "core/philox.hpp"

namespace dtrain {

namespace {

// Uniform integer in [0, range) without bias (multiply-shift with rejection), consuming draws
// from `rs` at counter `ctr` onward.
uint64_t bounded(const RandomStream& rs, uint64_t& ctr, uint64_t range) {
  if (range <= (uint64_t(1) << 32)) {
    uint64_t m = uint64_t(rs.bits(ctr++)) * range;
    if (uint32_t(m) < range) {
      uint32_t threshold = uint32_t((uint64_t(1) << 32) % range);
      while (uint32_t(m) < threshold) m = uint64_t(rs.bits(ctr++)) * range;
    }
    return m >> 32;
  }
  auto draw = [&] {
    uint64_t hi = rs.bits(ctr++);
    return (hi << 32) | rs.bits(ctr++);
  };
  unsigned __int128 m = (unsigned __int128)draw() * range;
  if (uint64_t(m) < range) {
    uint64_t threshold = (0 - range) % range;
    while (uint64_t(m) < threshold) m = (unsigned __int128)draw() * range;
  }
  return uint64_t(m >> 64);
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t dataset_size, bool shuffle, uint64_t seed, int num_replicas, int rank,
                                       bool drop_last, bool pad)
    : n_(dataset_size),
      shuffle_(shuffle),
      seed_(seed),
      num_replicas_(num_replicas),
      rank_(rank),
      drop_last_(drop_last),
      pad_(pad || drop_last) {
  require(dataset_size >= 0, "dataset size must not be negative (got " + std::to_string(dataset_size) + ")");
  require(num_replicas >= 1, "number of data-parallel replicas must be at least 1 (got " +
                                 std::to_string(num_replicas) + "): check the world size and parallel layout");
  require(rank >= 0 && rank < num_replicas, "data-parallel rank " + std::to_string(rank) + " is outside [0, " +
                                                std::to_string(num_replicas) +
                                                "): check the world size and parallel layout");
  const int64_t R = num_replicas;
  num_samples_ = drop_last ? n_ / R : pad_ ? (n_ + R - 1) / R : (n_ > rank ? (n_ - rank + R - 1) / R : 0);
  compute();
}

void DistributedSampler::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  compute();
}

void DistributedSampler::permutation(int64_t n, uint64_t seed, int64_t epoch, std::vector<int64_t>& out,
                                     uint32_t purpose) {
  out.resize(size_t(n));
  std::iota(out.begin(), out.end(), int64_t(0));
  const RandomStream rs{seed, uint32_t(uint64_t(epoch)), uint32_t(uint64_t(epoch) >> 32), purpose};
  uint64_t ctr = 0;
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = int64_t(bounded(rs, ctr, uint64_t(i) + 1));
    std::swap(out[size_t(i)], out[size_t(j)]);
  }
}

void DistributedSampler::compute() {
  if (shuffle_) {
    permutation(n_, seed_, epoch_, order_);
  } else {
    order_.resize(size_t(n_));
    std::iota(order_.begin(), order_.end(), int64_t(0));
  }
  // Position k of the padded (or truncated) order is order_[k % n]; rank r takes k = r + i*R.
  indices_.resize(size_t(num_samples_));
  for (int64_t i = 0; i < num_samples_; ++i) {
    int64_t k = rank_ + i * num_replicas_;
    indices_[size_t(i)] = order_[size_t(k % n_)];
  }
}

}  // namespace dtrain
