// Watching a run (docs/watching.md): the training thread's phase clock, every rank's phase figures
// in the `train` records, summary.json's step_time and the end-of-run table, the trace window and
// RUN/trace.json with the ranks' clocks aligned, every rank's resource samples (records, TensorBoard,
// summary.json's maxima).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/clock_offsets.hpp"
#include "comm/world.hpp"
#include "core/json.hpp"
#include "core/phase_clock.hpp"
#include "kernels/device.hpp"
#include "train/config.hpp"

namespace dtrain {

class JsonlWriter;
class TensorBoardWriter;
class ResourceSampler;
class ResourceMax;

class JobWatch {
 public:
  JobWatch(const TrainConfig& cfg, World& world, ComputeDevice& dev, std::string run_dir);
  ~JobWatch();

  // Collective, on the training thread, before the first step: the clocks' offsets, the phase
  // clock; steps_done: the steps the run starts after (a resumed run's).
  void start(int64_t steps_done);
  // Closes global step `step` (1-based). The trace window opens and closes here.
  void end_step(int64_t step);
  // Closes time that is no step (an epoch's end: validation, model_best, its checkpoint).
  void end_interval(const char* what);

  // Collective at a logged step: the `train` record's t (when the step ended, seconds since start()
  // on rank 0's clock), step_seconds and phases (means over the steps since the previous record),
  // every rank's when there are several. Returns rank 0's.
  PhaseSeconds fill_train_record(Json& record);
  // Collective after the last step: summary.json's step_time (with steady_rows_per_s: rows of the
  // loss per second over the steps it covers); rank 0 prints the table. rows_per_step: global.
  Json step_summary(double rows_per_step);
  // When train.trace is on: every rank's spans to rank 0 (collective), then rank 0 writes
  // RUN/trace.json (no collective: the others need not wait for the writing).
  void gather_trace();
  void write_trace();
  // Collective: every rank's resource samples since the last call, written by rank 0 (jsonl and tb:
  // rank 0's, null elsewhere) as `resource` records and Resources/rank<R>/<figure> scalars. final:
  // the run's last call (every rank samples once more first).
  void write_resources(JsonlWriter* jsonl, TensorBoardWriter* tb, bool final = false);
  Json resources_summary() const;  // summary.json's resources (rank 0, after the final write)

  double run_seconds() const;  // since start(), on rank 0's clock (any rank)
  static constexpr int kWarmupSteps = 1;

 private:
  struct Sums {
    PhaseSeconds phases{};
    double step = 0.0;
    int64_t steps = 0;
    int64_t changes = 0;  // phase changes (clock marks)
    void add(const PhaseSeconds& p, size_t changes);
  };
  void trace_step(const char* name, int64_t step);

  TrainConfig cfg_;
  World& world_;
  ComputeDevice& dev_;
  std::string run_dir_;
  std::unique_ptr<PhaseClock> clock_;
  ClockOffsets offsets_;
  std::vector<std::string> hosts_;
  double change_cost_ = 0.0;  // seconds per phase change, measured at start()
  double start_ = 0.0;  // monotonic_seconds() at start(), this rank's clock
  int64_t first_step_ = 1, trace_first_ = 1, trace_last_ = 0;
  Sums since_log_, run_, every_;  // since the last record, after warm-up, all
  std::vector<std::string> trace_texts_;  // rank 0: every rank's spans (gather_trace)
  int64_t trace_dropped_ = 0;
  std::unique_ptr<ResourceSampler> sampler_;  // train.sample_every_s > 0
  std::unique_ptr<ResourceMax> resource_max_;
};

}  // namespace dtrain
