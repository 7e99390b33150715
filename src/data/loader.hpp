// Batches of any dataset's samples in sampler order, assembled one batch ahead on a background
// thread (double buffering); next() reuses the caller's Batch storage.
#pragma once
#include <array>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batch.hpp"
#include "data/dataset.hpp"
#include "data/sampler.hpp"

namespace dtrain {

class BatchLoader {
 public:
  // dataset and sampler must outlive the loader. With prefetch off, next() fills the batch itself.
  // epoch_batches > 0: every epoch hands out that many batches, the ones past this rank's samples
  // as filler batches (Batch::filler), so that ranks with unequal shares of an unpadded sampler
  // step together.
  BatchLoader(const Dataset& dataset, const DistributedSampler& sampler, int64_t batch_size, bool drop_last,
              bool prefetch = true, int64_t epoch_batches = 0);
  ~BatchLoader();  // stops and joins the prefetch thread, also mid-epoch
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  int64_t batch_size() const { return batch_size_; }
  // Batches per epoch for this rank: the last partial batch counts unless drop_last; at least
  // epoch_batches.
  int64_t num_batches() const;

  // Takes the sampler's current order (call sampler.set_epoch first) and starts prefetching.
  void start_epoch();
  // Fills `out` with the next batch; false at the end of the epoch. Allocates only while `out`
  // is smaller than a full batch (so at most on the first call).
  bool next(Batch& out);

 private:
  void fill(int64_t b, Batch& dst) const;
  void reserve(Batch& dst) const;  // room for a full batch of shape_
  void worker_main();
  void stop_worker();

  const Dataset& dataset_;
  const SampleShape shape_;  // the dataset's, read once
  const DistributedSampler& sampler_;
  const int64_t batch_size_;
  const bool drop_last_;
  const bool prefetch_;
  const int64_t epoch_batches_;

  std::vector<int64_t> order_;  // this epoch's indices for this rank
  int64_t first_sample_ = 0;    // what the dataset calls this epoch's sample 0 (continues_across_epochs)
  int64_t n_batches_ = 0;       // this epoch
  int64_t next_batch_ = 0;      // next batch next() hands out
  bool started_ = false;

  // Double buffer: slot b % 2 holds batch b once ready_[b % 2] == b (-1: free).
  std::array<Batch, 2> slots_;
  std::array<int64_t, 2> ready_{-1, -1};
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace dtrain
