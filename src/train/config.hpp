// The training run's configuration: TOML presets plus `--set key=value` overrides, every key known
// and typed, so a misspelt key or a bad value is one clear error before anything runs.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "core/config_keys.hpp"
#include "data/mix_source.hpp"
#include "nn/model_kind.hpp"
#include "optim/optimizer.hpp"

namespace dtrain {

// "f32" or "bf16" (`what` names where it was given); Error naming the choices otherwise.
Precision parse_precision(const std::string& text, const std::string& what);

struct DataConfig {
  std::string dir = "data/builtin";  // a prepared folder (vocab.txt, train.bin, …)
  int64_t stride = 1;                // training windows start every `stride` tokens
  int64_t eval_stride = 0;           // validation/test windows; 0 = seq_len (each token scored once)
  bool shuffle = true;
  bool document_boundaries = false;  // token shards: windows stay within a document
  std::vector<MixEntry> mix;         // several folders drawn from by weight; empty: data.dir alone
  std::string stage;                 // node-local folder the data is copied to before training; "": none
};

// The run's data: data.mix when it names sources, else data.dir; staged first (data.stage) when asked,
// one copier per node. `log`: print what staging did (rank 0).
std::unique_ptr<DataSource> open_run_data(const DataConfig& data, InputKind input, bool log = false);

struct TrainConfig {
  int64_t epochs = 10;
  int64_t max_steps = 0;  // stop after this many optimizer steps in total; 0 = no limit
  int64_t batch_size = 512;  // per data-parallel rank and micro-step (with global_batch: the most)
  int64_t grad_accum = 1;    // micro-steps per optimizer step (gradients accumulate locally)
  // Samples per optimizer step over every rank, kept at any data-parallel size (global_batch.hpp);
  // 0: not set, the global batch is batch_size × data-parallel ranks × grad_accum.
  int64_t global_batch = 0;
  uint64_t seed = 1;
  int threads = 0;        // 0 = all cores
  std::string precision = "f32";  // f32 | bf16 (bf16 matmuls, f32 master weights and accumulation)
  // none | selective (blocks recompute attention probabilities and activation outputs in backward)
  // | full (each hidden unit keeps only its input; its forward runs again in its backward)
  std::string recompute = "none";
  // auto (a GPU when one is visible and the CUDA backend loads, else the CPU) | cpu | cuda (the GPU
  // of the local rank) | cuda:N; also `--set device=…`
  std::string device = "auto";
  bool share_gpus = false;  // several ranks of a node may use one GPU (refused otherwise)
  int64_t eval_every = 0;         // steps between evaluations in addition to epoch ends; 0 = epochs only
  int64_t eval_max_batches = 0;   // cap on validation per evaluation, in global batches; 0 = all
  int64_t checkpoint_every = 0;   // steps between checkpoints in addition to epoch ends; 0 = epochs only
  int64_t keep_checkpoints = 2;
  // auto: sharded (one data file per rank) when the world is larger than 1, else full (one
  // safetensors file of the whole model); docs/checkpoints.md
  std::string checkpoint_format = "auto";  // auto | full | sharded
  bool checkpoint_async = false;  // sharded saves written by a background thread while training goes on
  std::string init_from;          // a checkpoint folder whose weights a fresh run starts from
  // auto: go on with the run dir's run if it holds one (`--resume auto`); no: a fresh run only
  std::string resume = "no";
  double stop_before = 0.0;  // minutes before the job's end time to save and stop at; 0: only on a signal
  int64_t log_every = 10;         // steps between metrics.jsonl points
  bool progress = true;           // progress line on a terminal
  // Watching the job (docs/watching.md): a Chrome trace of every rank (of steps A:B, "" = all),
  // resource samples every sample_every_s seconds (0 = none), the peak for MFU (0 = known GPUs').
  bool trace = false;
  std::string trace_steps;
  double sample_every_s = 10.0;
  double peak_tflops = 0.0;
  // trace_steps parsed: the first and last step traced (1-based; last 0 = to the end); Error if malformed
  std::pair<int64_t, int64_t> trace_range() const;
  Precision compute_precision() const;  // train.precision, as the kernels take it
  Recompute recompute_mode() const;     // train.recompute, as the model plans it
};

struct ParallelConfig {
  int64_t dp = 0;             // plain DDP's name for dp_replicate; 0 = the world size
  // The device mesh pp × dp_replicate × dp_shard × cp × tp; each ≥ 1, or -1: what the world leaves
  // (cp ≥ 1). Context parallel: ring or alltoall attention (docs/distributed.md). Expert parallel: ep
  // divides dp_shard × cp.
  int64_t pp = 1, dp_replicate = -1, dp_shard = 1, tp = 1, cp = 1, ep = 1;
  std::string cp_mode = "ring";
  double bucket_mb = 0.0;     // DDP gradient bucket size; 0: an eighth of the gradients, 1 to 25 MB
  // FSDP (dp_shard > 1): units gathered ahead; false keeps gathered parameters from forward to
  // backward (SHARD_GRAD_OP); the type gradients are reduced in (f32, or bf16 under bf16 precision)
  int64_t fsdp_prefetch = 1;
  bool fsdp_reshard_after_forward = true;
  // Tensor parallel: also split the rows of norms, dropout and residuals across the tp ranks
  // (all-gather and reduce-scatter instead of all-reduce; less activation memory).
  bool tp_sequence = false;
  // Tensor parallel: overlap the region collectives with the matmuls (docs/distributed.md).
  bool tp_overlap = true;
  int64_t tp_overlap_chunks = 1;
  std::string fsdp_reduce_dtype = "f32";
  // Pipeline parallel (pp > 1): the schedule (docs/pipeline.md), or a file of actions to run
  // instead; stages per rank; micro-batches per pass (0: pp); where stages begin ("" : balanced by
  // cost, else the first unit of every stage but the first, e.g. "3,5"). train.trace shows the
  // pipeline's actions.
  std::string pp_schedule = "1f1b";
  std::string pp_schedule_file;
  std::string pp_unit_costs;  // each unit's cost for balancing, "" : training FLOPs
  int64_t pp_virtual = 1;
  int64_t microbatches = 0;
  std::string pp_split;
  int64_t timeout_s = 300;    // longest wait for another rank in any collective or rendezvous
  std::string backend = "auto";  // collectives over auto (nccl on a GPU, else gloo), gloo, nccl or mpi
};

struct RunConfig {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimizerConfig optim;
  ParallelConfig parallel;
  // The model.* values as given (text and where from), so that a model.kind given after them reads
  // them again by that kind's table; one the kind does not have is named by validate().
  struct GivenValue {
    std::string name, text, origin;
  };
  std::vector<GivenValue> model_given;

  // Applies `key=value` (e.g. "train.lr=0.001"); Error for unknown keys or bad values.
  void set(const std::string& key, const std::string& value, const std::string& origin = "--set");
  void load_toml(const std::string& path);
  // {"section": {"key": value, ...}, ...} (a run's config.json, or trainer.json's "config") read
  // from `source`: each value set as its text.
  void apply_json(const Json& j, const std::string& source);
  void validate() const;  // everything but model.vocab_size, which comes from the data
  std::vector<int> pp_split_units() const;  // parallel.pp_split parsed (empty: balanced); Error if malformed
  std::vector<double> pp_unit_cost_list() const;  // parallel.pp_unit_costs parsed (empty: FLOPs); Error if malformed
  Json to_json() const;
  static std::vector<std::string> known_keys();
  // Every key with its default, type (an integer's range, a choice's values) and one line of meaning.
  static std::string describe_keys();
};


}  // namespace dtrain
