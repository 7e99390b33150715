// Weighted mixing of datasets: sample i of a mix is a pure function of i (which source, which of its
// samples), so any rank at any data-parallel size draws the same sample for the same global index and
// a resumed run continues every source where it was. Also the plain concatenation of datasets.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/dataset.hpp"

namespace dtrain {

// Sources interleaved in proportion to their weights, as evenly as can be: the weights are rounded to
// whole shares of a period of kMixPeriod samples, and each period repeats the same smooth pattern
// (each next sample from the source furthest behind its share). Source s's k-th draw is its sample
// k mod size_s: a source whose share is larger than it repeats, in order, each pass. The mix goes on
// across epochs (epoch e is its samples e·size() .. (e+1)·size() − 1), so a source whose share of an
// epoch is smaller than it is read on, not restarted, each epoch.
class MixDataset : public Dataset {
 public:
  static constexpr int64_t kMixPeriod = int64_t(1) << 20;
  // Every source has samples of one shape; weights > 0. size: the mix's samples per epoch.
  MixDataset(std::vector<const Dataset*> sources, const std::vector<double>& weights, int64_t size);

  int64_t size() const override { return size_; }
  SampleShape shape() const override { return sources_[0]->shape(); }
  void get(int64_t i, void* inputs, int32_t* targets) const override;  // any i >= 0
  bool continues_across_epochs() const override { return true; }
  // Which source sample i comes from, and which of its draws it is (0, 1, …).
  struct Draw {
    int source;
    int64_t draw;
  };
  Draw draw(int64_t i) const;
  // Samples a source gives in the first n samples of the mix.
  int64_t drawn(int source, int64_t n) const;
  // Samples each source gave through epoch `epoch`'s first `consumed` samples, taken in `order` (the
  // epoch's permutation of its samples; empty: in order).
  std::vector<int64_t> drawn_through(int64_t epoch, int64_t consumed, const std::vector<int64_t>& order) const;

 private:
  std::vector<const Dataset*> sources_;
  std::vector<int64_t> shares_;          // samples of each source per period (sum kMixPeriod)
  std::vector<uint8_t> pattern_;         // source of each position of a period
  std::vector<uint32_t> rank_in_source_;  // how many earlier positions of the period hold the same source
  int64_t size_;
};

// Datasets one after the other (the validation of a mix: every source's split, whole).
class ConcatDataset : public Dataset {
 public:
  explicit ConcatDataset(std::vector<const Dataset*> parts);
  int64_t size() const override { return starts_.back(); }
  SampleShape shape() const override { return parts_[0]->shape(); }
  void get(int64_t i, void* inputs, int32_t* targets) const override;

 private:
  std::vector<const Dataset*> parts_;
  std::vector<int64_t> starts_;  // first sample of each part; last: the total
};

}  // namespace dtrain
