// Distributed data parallel: parameters start equal (broadcast from rank 0); after each unit's
// backward its gradients join a bucket, and a full bucket's average over the ranks is launched
// at once, asynchronously, so communication overlaps the rest of backward. Expert units
// (Unit::experts) are reduced over the ranks that hold the same experts, in buckets of their own.
#pragma once
#include <algorithm>
#include <array>
#include <functional>
#include <vector>

#include "comm/process_group.hpp"
#include "nn/model.hpp"

namespace dtrain {

struct DdpStats {
  int64_t steps = 0;
  double comm_seconds = 0.0;     // time the allreduces took on this rank's communication thread
  double exposed_seconds = 0.0;  // time this rank's step waited for them after backward (the waits alone)
  int64_t bytes = 0;             // gradient bytes reduced per step
};

// The ranks' figures together (DataParallel::gather_figures). A rank that ends backward before the
// others waits in its all-reduces for them to arrive: that is imbalance, not communication. In each
// step the rank that waited least is the last to end backward, and it waited for communication alone.
struct DdpFigures {
  int64_t steps = 0;
  double comm_seconds = 0.0;        // per step, the least time a rank's allreduces took: the transfers
  double exposed_seconds = 0.0;     // per step, the least a rank waited for them after backward
  double rank_wait_seconds = 0.0;   // a rank's mean waits less exposed_seconds: waiting for slower ranks
  double hidden_fraction() const {
    return comm_seconds > 0 ? std::max(0.0, 1.0 - exposed_seconds / comm_seconds) : 0.0;
  }
};

class DataParallel : public UnitHooks {
 public:
  // Buckets of whole units, at most bucket_bytes each (the first at most 1 MiB) unless one unit is
  // larger, filled in backward order (last unit first); bucket_bytes 0: automatic_bucket_bytes().
  // Expert units are averaged over `experts` instead (null: `group`): the ranks that hold the same experts.
  DataParallel(const std::vector<Unit*>& units, ProcessGroup& group, size_t bucket_bytes,
               ProcessGroup* experts = nullptr);
  // An eighth of the units' gradient bytes, within 1 and 25 MiB: a model of a few buckets' size
  // would otherwise fill one bucket that only the last backward (the embedding's) completes.
  static size_t automatic_bucket_bytes(const std::vector<Unit*>& units);
  size_t bucket_bytes() const { return bucket_bytes_; }

  // Makes every rank's parameters equal to rank 0's (expert units: to the first of the ranks holding the same experts).
  void broadcast_parameters();
  // Off: gradients only accumulate locally (non-final micro-steps of gradient accumulation).
  void set_sync(bool on) { sync_ = on; }
  // Launches what is left and waits for every bucket: gradients are then the average over ranks.
  // `arrived`, when given, is called with each bucket's unit indices as soon as that bucket's average
  // is in, the buckets taken in the order they were launched (the order they complete), so that work
  // on those units (the optimizer's update) runs while the buckets after it are still being reduced.
  void finish_gradients(const std::function<void(const std::vector<size_t>& units)>& arrived = {});

  void post_backward(Unit& u) override;
  size_t num_buckets() const { return buckets_.size(); }
  const DdpStats& stats() const { return stats_; }  // this rank's
  // Keep each step's waits for gather_figures (off by default: host communication only, Gloo or
  // MPI, whose work is timed on the host; every rank of the group sets the same).
  void keep_step_figures(bool on) {
    keep_steps_ = on;
    if (on) step_records_.reserve(kStepRecords);
  }
  // Collective over the ranks that reduce together (each calls it after training): with
  // keep_step_figures on, the figures of every step so far combined over the ranks; else none.
  DdpFigures gather_figures();

 private:
  struct Bucket {
    ProcessGroup* group = nullptr;  // its units' ranks
    bool launched = false;          // this step (nothing to launch for a group of one rank)
    std::vector<size_t> units;  // indices into units_
    float* data = nullptr;      // contiguous gradient range of those units
    size_t numel = 0;
    size_t pending = 0;         // units whose gradients are not final yet
    WorkPtr work;
  };
  void launch(Bucket& b);
  bool reduces() const;  // whether any bucket has anything to do
  // Each step's (waited, allreduce) seconds are kept, and every kStepRecords steps (and at
  // gather_figures) the ranks take each step's least of both with one allreduce (min).
  void record_step(double waited, double comm);
  void fold_step_records();
  static constexpr size_t kStepRecords = 1024;

  std::vector<Unit*> units_;
  ProcessGroup& group_;
  ProcessGroup* experts_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> launched_;   // this step's buckets in launch order
  std::vector<size_t> bucket_of_;  // unit index → bucket
  size_t bucket_bytes_ = 0;
  bool sync_ = true;
  bool armed_ = false;             // a backward with sync on is in progress
  bool keep_steps_ = false;
  DdpStats stats_;
  std::vector<std::array<float, 2>> step_records_;  // not yet folded, at most kStepRecords
  DdpFigures least_;                                 // the folded steps' least waits and allreduces
};

}  // namespace dtrain
