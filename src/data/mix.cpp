// MixDataset and ConcatDataset (see mix.hpp).
#include "data/mix.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace dtrain {

namespace {

// Each weight's whole share of `period` (largest remainders first, ties to the earlier source), each >= 1.
std::vector<int64_t> whole_shares(const std::vector<double>& weights, int64_t period) {
  double total = 0;
  for (double w : weights) total += w;
  std::vector<int64_t> shares(weights.size());
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t s = 0; s < weights.size(); ++s) {
    const double exact = weights[s] / total * double(period);
    shares[s] = int64_t(std::floor(exact));
    given += shares[s];
    remainders.push_back({exact - double(shares[s]), s});
  }
  std::stable_sort(remainders.begin(), remainders.end(), [](auto a, auto b) { return a.first > b.first; });
  for (size_t k = 0; given < period; ++k, ++given) ++shares[remainders[k % remainders.size()].second];
  for (size_t s = 0; s < weights.size(); ++s)
    require(shares[s] > 0, "data.mix: weight " + std::to_string(weights[s]) + " is less than one sample in " +
                               std::to_string(period) + " of the mix: raise it, or leave the source out");
  return shares;
}

}  // namespace

MixDataset::MixDataset(std::vector<const Dataset*> sources, const std::vector<double>& weights, int64_t size)
    : sources_(std::move(sources)), size_(size) {
  DT_ASSERT(!sources_.empty() && sources_.size() == weights.size() && sources_.size() < 256);
  shares_ = whole_shares(weights, kMixPeriod);
  pattern_.resize(size_t(kMixPeriod));
  rank_in_source_.resize(size_t(kMixPeriod));
  std::vector<int64_t> taken(sources_.size(), 0);
  for (int64_t p = 0; p < kMixPeriod; ++p) {
    // the source furthest behind its share after p + 1 samples: max of share·(p+1) − taken·period
    size_t best = 0;
    int64_t best_lag = INT64_MIN;
    for (size_t s = 0; s < sources_.size(); ++s) {
      const int64_t lag = shares_[s] * (p + 1) - taken[s] * kMixPeriod;
      if (lag > best_lag) best = s, best_lag = lag;
    }
    pattern_[size_t(p)] = uint8_t(best);
    rank_in_source_[size_t(p)] = uint32_t(taken[best]++);
  }
}

MixDataset::Draw MixDataset::draw(int64_t i) const {
  const int64_t period = i / kMixPeriod, at = i % kMixPeriod;
  const int s = pattern_[size_t(at)];
  return {s, period * shares_[size_t(s)] + rank_in_source_[size_t(at)]};
}

int64_t MixDataset::drawn(int source, int64_t n) const {
  const int64_t full = n / kMixPeriod, rest = n % kMixPeriod;
  int64_t count = full * shares_[size_t(source)];
  for (int64_t p = 0; p < rest; ++p) count += pattern_[size_t(p)] == source;
  return count;
}

std::vector<int64_t> MixDataset::drawn_through(int64_t epoch, int64_t consumed,
                                               const std::vector<int64_t>& order) const {
  std::vector<int64_t> counts(sources_.size());
  for (size_t s = 0; s < sources_.size(); ++s) counts[s] = drawn(int(s), epoch * size_);
  for (int64_t j = 0; j < consumed; ++j) ++counts[size_t(draw(epoch * size_ + (order.empty() ? j : order[size_t(j)])).source)];
  return counts;
}

void MixDataset::get(int64_t i, void* inputs, int32_t* targets) const {
  DT_ASSERT(i >= 0);
  const Draw d = draw(i);
  const Dataset& src = *sources_[size_t(d.source)];
  src.get(d.draw % src.size(), inputs, targets);
}

ConcatDataset::ConcatDataset(std::vector<const Dataset*> parts) : parts_(std::move(parts)) {
  DT_ASSERT(!parts_.empty());
  starts_.push_back(0);
  for (const Dataset* p : parts_) starts_.push_back(starts_.back() + p->size());
}

void ConcatDataset::get(int64_t i, void* inputs, int32_t* targets) const {
  const size_t part = size_t(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin()) - 1;
  parts_[part]->get(i - starts_[part], inputs, targets);
}

}  // namespace dtrain
