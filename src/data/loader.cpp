// Prefetching batch loader: a per-epoch worker thread fills two batch slots ahead of the consumer.
#include "data/loader.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace dtrain {

namespace {

template <class T>
void copy_into(std::vector<T>& dst, const std::vector<T>& src) {
  dst.resize(src.size());  // no allocation once dst has held a full batch
  std::copy(src.begin(), src.end(), dst.begin());
}

}  // namespace

BatchLoader::BatchLoader(const Dataset& dataset, const DistributedSampler& sampler, int64_t batch_size,
                         bool drop_last, bool prefetch, int64_t epoch_batches)
    : dataset_(dataset),
      shape_(dataset.shape()),
      sampler_(sampler),
      batch_size_(batch_size),
      drop_last_(drop_last),
      prefetch_(prefetch),
      epoch_batches_(epoch_batches) {
  DT_ASSERT(shape_.inputs >= 0 && shape_.targets >= 0);
  require(batch_size >= 1, "batch size must be at least 1 (got " + std::to_string(batch_size) +
                               "): set train.batch_size to a positive value");
  require(sampler.dataset_size() <= dataset.size(),  // a prefix is fine (capped evaluation)
          "sampler covers " + std::to_string(sampler.dataset_size()) + " samples but the dataset has only " +
              std::to_string(dataset.size()) + ": build the sampler from this dataset's size");
  if (prefetch_)
    for (auto& s : slots_) reserve(s);
}

BatchLoader::~BatchLoader() { stop_worker(); }

int64_t BatchLoader::num_batches() const {
  const int64_t n = sampler_.size();
  return std::max(epoch_batches_, drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_);
}

void BatchLoader::reserve(Batch& dst) const {
  const size_t n = size_t(batch_size_);  // no-ops once dst has held a full batch
  if (shape_.input == InputKind::tokens)
    dst.tokens.reserve(n * size_t(shape_.inputs));
  else
    dst.pixels.reserve(n * size_t(shape_.inputs));
  dst.targets.reserve(n * size_t(shape_.targets));
  dst.sample_index.reserve(n);
}

void BatchLoader::fill(int64_t b, Batch& dst) const {
  const int64_t I = shape_.inputs, K = shape_.targets;
  const bool tokens = shape_.input == InputKind::tokens;
  const int64_t first = b * batch_size_;
  // Past this rank's samples: one stand-in sample (the epoch's first of this rank, or the dataset's).
  dst.filler = first >= int64_t(order_.size());
  const int64_t n = dst.filler ? 1 : std::min<int64_t>(batch_size_, int64_t(order_.size()) - first);
  DT_ASSERT(n > 0 && (!dst.filler || dataset_.size() > 0));
  dst.shape = shape_;
  dst.samples = n;
  // Only the kind's input vector holds values; the other is emptied (its storage kept).
  if (tokens) {
    dst.tokens.resize(size_t(n * I));
    dst.pixels.clear();
  } else {
    dst.pixels.resize(size_t(n * I));
    dst.tokens.clear();
  }
  dst.targets.resize(size_t(n * K));
  dst.sample_index.resize(size_t(n));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t idx = dst.filler ? (order_.empty() ? 0 : order_[0]) : order_[size_t(first + r)];
    dst.sample_index[size_t(r)] = idx;
    void* in = tokens ? static_cast<void*>(dst.tokens.data() + r * I) : static_cast<void*>(dst.pixels.data() + r * I);
    dataset_.get(first_sample_ + idx, in, dst.targets.data() + r * K);
  }
}

void BatchLoader::worker_main() {
  try {
    for (int64_t b = 0; b < n_batches_; ++b) {
      const int slot = int(b & 1);
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || ready_[slot] == -1; });
        if (stop_) return;
      }
      fill(b, slots_[slot]);  // the consumer does not touch a free slot
      {
        std::lock_guard<std::mutex> lock(mu_);
        ready_[slot] = b;
      }
      cv_.notify_all();
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

void BatchLoader::stop_worker() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  stop_ = false;
  ready_ = {-1, -1};
  error_ = nullptr;
}

void BatchLoader::start_epoch() {
  stop_worker();
  const auto& idx = sampler_.indices();
  order_.assign(idx.begin(), idx.end());
  first_sample_ = dataset_.continues_across_epochs() ? sampler_.epoch() * dataset_.size() : 0;
  n_batches_ = num_batches();
  next_batch_ = 0;
  started_ = true;
  if (prefetch_ && n_batches_ > 0) worker_ = std::thread(&BatchLoader::worker_main, this);
}

bool BatchLoader::next(Batch& out) {
  DT_ASSERT(started_);
  if (next_batch_ >= n_batches_) {
    stop_worker();  // the worker has finished; join it
    return false;
  }
  const int64_t b = next_batch_;
  reserve(out);  // allocates once: later batches of any size fit
  if (!prefetch_) {
    fill(b, out);
  } else {
    const int slot = int(b & 1);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return ready_[slot] == b || error_ != nullptr; });
      if (error_ && ready_[slot] != b) {
        std::exception_ptr e = error_;
        lock.unlock();
        stop_worker();
        started_ = false;
        std::rethrow_exception(e);
      }
    }
    const Batch& src = slots_[size_t(slot)];  // the worker leaves a ready slot alone
    out.shape = src.shape;
    out.samples = src.samples;
    out.filler = src.filler;
    copy_into(out.tokens, src.tokens);
    copy_into(out.pixels, src.pixels);
    copy_into(out.targets, src.targets);
    copy_into(out.sample_index, src.sample_index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_[slot] = -1;
    }
    cv_.notify_all();
  }
  ++next_batch_;
  return true;
}

}  // namespace dtrain
