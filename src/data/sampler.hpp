// Which dataset indices each rank visits per epoch (PyTorch DistributedSampler semantics), with a
// Philox-driven shuffle so every machine computes the same order.
#pragma once
#include <cstdint>
#include <vector>

namespace dtrain {

class DistributedSampler {
 public:
  // Starts at epoch 0. The permutation of [0, n) depends only on (seed, epoch); it is padded by
  // repeating from its start to a multiple of num_replicas (or truncated when drop_last), and
  // rank r takes positions r, r+R, r+2R, ... Without padding (evaluation) each index is visited
  // exactly once and the ranks' shares differ by at most one.
  DistributedSampler(int64_t dataset_size, bool shuffle, uint64_t seed, int num_replicas = 1, int rank = 0,
                     bool drop_last = false, bool pad = true);

  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  int64_t size() const { return num_samples_; }  // per-rank count
  int64_t total_size() const { return pad_ ? num_samples_ * num_replicas_ : n_; }
  int64_t dataset_size() const { return n_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  const std::vector<int64_t>& indices() const { return indices_; }

  // The full permutation of [0, n) for (seed, epoch), before padding and rank selection. `purpose`
  // names another stream of permutations for another use (the valid cut of image data:
  // kValidCutPurpose), so that none repeats an epoch's order.
  static constexpr uint32_t kEpochPurpose = 0x5A, kValidCutPurpose = 0x56414C49;  // "VALI"
  static void permutation(int64_t n, uint64_t seed, int64_t epoch, std::vector<int64_t>& out,
                          uint32_t purpose = kEpochPurpose);

 private:
  void compute();

  int64_t n_;
  bool shuffle_;
  uint64_t seed_;
  int num_replicas_;
  int rank_;
  bool drop_last_;
  bool pad_;
  int64_t epoch_ = 0;
  int64_t num_samples_ = 0;
  std::vector<int64_t> order_;
  std::vector<int64_t> indices_;
};

}  // namespace dtrain
