// What a run tells about itself: the setup lines before the first step (model, data, batch, each
// strategy's share of it), the strategies' end-of-run lines, every rank's peak memory, summary.json.
#pragma once
#include <vector>

#include "comm/world.hpp"
#include "data/source.hpp"
#include "parallel/plan.hpp"
#include "train/checkpoint/checkpoint.hpp"
#include "train/config.hpp"
#include "train/evaluate.hpp"
#include "train/global_batch.hpp"
#include "train/report/memory_account.hpp"
#include "train/report/run_parts.hpp"

namespace dtrain {

// Floats of this rank's units (a tensor-parallel slice of the model; whole before FSDP shards it).
int64_t held_floats(const Model& model);

// Rank 0, before the first step.
void print_setup(const RunParts& r, int64_t steps_per_epoch, int threads);
// Collective: print_setup's lines (rank 0), then every rank's threads and CPUs (on the CPU) and
// where the data-parallel workers run, as rank 0's lines.
void print_run_start(const RunParts& r, int64_t steps_per_epoch, int threads);
// The line a run with train.precision = bf16 prints on a CPU without native bf16 (no avx512_bf16,
// no AMX), where oneDNN emulates it or (no avx512) the run computes in f32; "" on a CPU with it.
std::string cpu_bf16_warning();
// A line per parallel strategy on what it moved (ParallelModel::figures).
void print_parallel_figures(const Json& figures);

// Every rank's peak memory, host and device, so the figure reported is the largest, and whose; and
// every rank's own account of its memory (MemoryAccount::total), to set beside its peak.
struct Peaks {
  std::vector<double> by_rank;  // per rank: host MiB, device MiB, accounted MiB
  int rss_rank = 0, device_rank = 0;
  double rss_mb() const { return by_rank[size_t(3 * rss_rank)]; }
  double device_mb() const { return by_rank[size_t(3 * device_rank + 1)]; }
  double rss_mb_of(int rank) const { return by_rank[size_t(3 * rank)]; }
  double accounted_mb_of(int rank) const { return by_rank[size_t(3 * rank + 2)]; }
};
Peaks gather_peaks(World& world, ComputeDevice& dev, int64_t accounted_bytes);  // collective

// A known device's dense peak TFLOP/s at this precision (H100, H200, A100 by name; bf16 on tensor
// cores, f32 without TF32), 0 when not known (a CPU).
double known_peak_tflops(const std::string& device, Precision precision);

// summary.json: the test figures, throughput, memory (dtrain's own account of this rank's, `memory`,
// and every rank's peak beside its account), the strategies' figures; tps: rows of the loss (tokens)
// per second of training.
// Rank 0's lines at the run's end: the test loss and metric, the steps and their speed (tps: rows of
// the loss per second of training), the peak memory (the most of any rank), each strategy's figures,
// and rank 0's memory account.
void print_run_end(const RunParts& r, const TrainerState& st, const EvalResult& test, const Peaks& peaks,
                   const MemoryAccount& memory, const Json& figures, double tps);

Json run_summary(const RunParts& r, const TrainerState& st, const EvalResult& test, const Peaks& peaks,
                 const MemoryAccount& memory, const Json& figures, int threads, double tps, double device_seconds);

}  // namespace dtrain
