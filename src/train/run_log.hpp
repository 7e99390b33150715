// The run's log: rank 0's console lines about the run's progress, its metrics.jsonl records and its
// TensorBoard scalars, one method per kind of record (train, eval, epoch, test, checkpoints), with
// the words of the model's metric (perplexity or accuracy) in one place.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/json.hpp"
#include "core/phase_clock.hpp"
#include "nn/expert_load.hpp"
#include "train/evaluate.hpp"
#include "train/report/run_dir.hpp"

namespace dtrain {

class JsonlWriter;
class TensorBoardWriter;

// The last optimizer step's figures, for its train record.
struct StepFigures {
  double loss = 0.0;  // mean over the step's rows (all ranks' when averaged)
  double norm = 0.0;  // the gradient's global norm (with optim.grad_clip)
  float lr = 0.0f;
};

// An epoch's line: the course's mean of batch means and the validation, with the epoch's speed.
struct EpochFigures {
  int64_t epoch = 0, epochs = 0;  // 1-based, of the run's
  bool whole = true;              // false: the run stopped inside the epoch
  double train_loss = 0.0;
  EvalResult valid;
  double rows_per_second = 0.0, seconds = 0.0;
};

class RunLog {
 public:
  // What the records need to know of the run. peak_tflops: per rank, for the MFU (0: unknown).
  struct Facts {
    Metric metric = Metric::perplexity;
    std::string row_unit = "tokens";  // what a row of the loss is (tokens, samples)
    int64_t rows_per_sample = 1;      // rows of the loss per sample
    double flops_per_sample = 0.0;    // training FLOPs per sample
    int ranks = 1;
    double peak_tflops = 0.0;
    bool grad_clip = false;  // records carry the gradient norm
  };
  explicit RunLog(Facts facts);
  ~RunLog();

  // Rank 0: appends to RUN/metrics.jsonl and the TensorBoard file `events` (rewind_logs' choice;
  // "" a new one). Before it, and on the other ranks, the record methods write nothing.
  void open(const std::string& run_dir, const std::string& events);
  bool is_open() const { return jsonl_ != nullptr; }
  JsonlWriter* jsonl() { return jsonl_.get(); }
  TensorBoardWriter* tensorboard() { return tb_.get(); }
  LogMarks marks() const;  // how far the logs go (a checkpoint keeps it)

  void write(const Json& record);  // a record made elsewhere (an elastic job's membership change)
  void checkpoint_load(int64_t step, double seconds, int64_t bytes_read);
  void checkpoint(int64_t step, bool sharded, bool async, int64_t bytes, double stall_seconds);
  void checkpoint_written(int64_t step, double write_seconds);

  // A step's rows of the loss (every rank's) and time: the train record's speed is over the steps
  // since the previous one (validation and checkpoints left out). Every rank counts.
  void count_step(int64_t rows, double seconds);
  // The train record of `step`: `record` holds the job watch's fields (time, phases); loss is the
  // step's averaged over the ranks. Every rank calls it (the window restarts); rank 0 writes.
  void train(Json record, int64_t step, int64_t epoch, double loss, const StepFigures& s, const PhaseSeconds& phases);
  // A mixture of experts' routing since the last train record, into that record (before train()):
  // aux_loss (the balance losses' weighted share of the loss, per sample), tokens_per_expert (per
  // layer, each expert's token copies per step) and expert_imbalance (per layer, the busiest
  // expert's tokens over the mean); and their scalars. Nothing for a model without experts.
  void expert_load(Json& record, const ExpertLoad& load, int64_t step);
  // An evaluation's record (split "val" or "test") at `step`, of epoch `epoch` (1-based).
  void eval(const char* split, int64_t step, int64_t epoch, const EvalResult& r);
  // The course's epoch lines on the console, the epoch record and its scalars.
  void epoch(int64_t step, const EpochFigures& e);
  // The test's scalars, at the run's last step (its record: eval("test", …)).
  void test_scalars(int64_t step, const EvalResult& r);
  void flush();

  // Into j: tflops_per_rank and mfu (null without a known peak) of rows_per_second of the loss
  // (every rank's). Returns the TFLOP/s per rank.
  double add_compute_rate(Json& j, double rows_per_second) const;
  // The metric's words: its record key ("ppl", "accuracy") and TensorBoard group.
  const char* metric_key() const;
  const char* metric_group() const;
  double peak_tflops() const { return facts_.peak_tflops; }

 private:
  Facts facts_;
  std::unique_ptr<JsonlWriter> jsonl_;
  std::unique_ptr<TensorBoardWriter> tb_;
  int64_t window_rows_ = 0;      // rows of the loss (global) since the last train record
  int64_t window_steps_ = 0;     // steps since then
  double window_seconds_ = 0.0;  // and the steps' time
};

}  // namespace dtrain
