// The run's report (see run_report.hpp).
#include "train/report/run_report.hpp"

#include <cmath>
#include <cstdio>

#include "core/limits.hpp"
#include "core/log_level.hpp"
#include "metrics/progress.hpp"
#include "train/report/memory_account.hpp"
#include "train/threads.hpp"

namespace dtrain {

int64_t held_floats(const Model& model) {
  int64_t n = 0;
  for (const Unit* u : model.units()) n += u->numel();
  return n;
}

std::string cpu_bf16_warning() {
  const std::string f32_here = ": train.precision = bf16 computes and keeps f32 here, as f32 does";
  if (!cpu_device().bf16_products())
    return (cpu_has_native_bf16() ? "oneDNN runs no bf16 matrix products on this CPU"
                                  : "this CPU has no native bf16 and no bf16 matrix products (no avx512)") + f32_here;
  if (cpu_has_native_bf16()) return "";
  return "this CPU has no native bf16 (no avx512_bf16, no AMX): oneDNN emulates bf16 matmuls, which ran 3.5x slower "
         "than f32 on an Intel Ice Lake (63 against 219 GFLOP/s); train.precision = f32 is faster here";
}

void print_setup(const RunParts& r, int64_t steps_per_epoch, int threads) {
  const RunConfig& cfg = r.cfg;
  const Model& model = r.par.model();
  const int dp = r.dp;
  const MeshShape& m = r.mesh.shape();
  const int64_t B = r.batch.micro_batch, A = r.batch.accum;
  std::printf("model: %s (%s), %lld parameters, %lld outputs; %s to train; batch %lld", r.kind.name().c_str(),
              r.kind.describe(cfg.model).c_str(), (long long)model.num_params(), (long long)model.outputs(),
              r.data.describe(r.train_set.size(), model.sample_shape()).c_str(), (long long)B);
  if (dp > 1) std::printf(" per rank × %d ranks", dp);
  if (A > 1) std::printf(" × %lld micro-steps", (long long)A);
  const bool gpu = r.dev.kind() != DeviceKind::cpu;
  std::printf(", %lld steps/epoch, %s, %s\n", (long long)steps_per_epoch,
              gpu ? r.dev.describe().c_str() : (std::to_string(threads) + (threads == 1 ? " thread" : " threads") + (dp > 1 ? " per rank" : "")).c_str(),
              r.precision == Precision::f32 ? "f32"
              : gpu                       ? "bf16 (tensor cores, f32 accumulation)"
              : !r.dev.bf16_products()    ? "bf16 asked (no bf16 products on this CPU: f32)"
              : cpu_has_native_bf16()     ? "bf16 (native avx512_bf16)"
                                          : "bf16 (no native bf16 on this CPU: slower)");
  if (r.precision == Precision::bf16 && !gpu && !cpu_bf16_warning().empty())
    std::printf("warning: %s\n", cpu_bf16_warning().c_str());
  if (cfg.train.recompute != "none")
    std::printf("recompute: %s; %.1f MB of activations planned on this rank\n", cfg.train.recompute.c_str(),
                double(model.activation_bytes()) / 1e6);
  if (DataParallel* ddp = r.par.ddp())
    std::printf("data parallel: %s; %zu gradient buckets of up to %.1f MB%s\n", r.world.env().describe().c_str(),
                ddp->num_buckets(), double(ddp->bucket_bytes()) / double(1 << 20),
                cfg.parallel.bucket_mb == 0 ? " (parallel.bucket_mb = 0: an eighth of the gradients)" : "");
  if (FullyShardedDataParallel* fsdp = r.par.fsdp()) {
    std::printf("fully sharded: %s over %d ranks%s, prefetch %lld; per rank %.1f MB of parameter and gradient "
                "shards, %.1f MB of optimizer state, %.1f MB of gather buffers, %.1f MB of gradient buffers\n",
                cfg.parallel.fsdp_reshard_after_forward ? "FULL_SHARD" : "SHARD_GRAD_OP", m.dp_shard,
                m.dp_replicate > 1 ? (" × " + std::to_string(m.dp_replicate) + " replicas (hybrid)").c_str() : "",
                (long long)cfg.parallel.fsdp_prefetch, double(fsdp->shard_bytes()) / 1e6,
                double(r.par.optimizer().state_bytes()) / 1e6, double(fsdp->pool_bytes()) / 1e6, double(fsdp->grad_pool_bytes()) / 1e6);
  }
  if (ContextParallel* cp = r.par.context_parallel())
    std::printf("context parallel: %d ranks, %s attention; each holds %lld of every sequence's %lld positions "
                "(chunks i and %d−i of %d)\n",
                cp->size(), cp_mode_name(cp->mode()), (long long)(model.sample_shape().targets / cp->size()),
                (long long)model.sample_shape().targets, 2 * cp->size() - 1, 2 * cp->size());
  if (ExpertParallel* ep = r.par.expert_parallel())
    std::printf("expert parallel: %d ranks of dp_shard × cp split the experts; this rank's model holds %.1f MB of "
                "the whole %.1f MB of parameters (before FSDP shards them)\n",
                ep->ranks(), double(held_floats(model) * int64_t(sizeof(float))) / 1e6,
                double(model.num_params() * int64_t(sizeof(float))) / 1e6);
  if (r.par.tp_regions())
    std::printf("tensor parallel: %d ranks%s; per rank %.1f MB of parameters (the model: %.1f MB)\n",
                m.tp, cfg.parallel.tp_sequence ? ", sequence parallel" : "",
                double(held_floats(model) * int64_t(sizeof(float))) / 1e6,
                double(model.num_params() * int64_t(sizeof(float))) / 1e6);
  if (PipelineEngine* pipe = r.par.pipeline()) {
    const Schedule& sch = pipe->schedule();
    std::printf("pipeline: %s, %d ranks × %d stages, %d micro-batches per pass; rank 0 holds", sch.name.c_str(),
                sch.pp, sch.virtual_stages, sch.microbatches);
    for (const Unit* u : model.units()) std::printf(" %s", u->name().c_str());
    std::printf("; simulated bubble %.1f%%\n", 100.0 * simulate(sch).mean_bubble);
  }
  if (r.world.size() > 1)
    std::printf("mesh: %s (%d ranks, tp fastest%s; collectives over %s); %s\n", m.describe().c_str(), r.world.size(),
                m.cp > 1 ? ", then cp" : "", r.world.describe_backend().c_str(), r.mesh.placement(16).c_str());
  std::fflush(stdout);
}

// A line per parallel strategy on what it moved (ParallelModel::figures).
void print_parallel_figures(const Json& f) {
  auto num = [&](const char* k) { return f.at(k).get<double>(); };
  if (f.contains("ddp_ranks"))
    std::printf("data parallel: %d ranks, %.1f MB of gradients per step; allreduce %.2f s in all, %.2f s of it "
                "exposed after backward (%.0f%% hidden); %.2f s a rank waited for slower ranks\n",
                f.at("ddp_ranks").get<int>(), num("ddp_bytes_per_step") / 1e6, num("ddp_comm_seconds"),
                num("ddp_exposed_seconds"), 100.0 * num("ddp_hidden_fraction"), num("ddp_rank_wait_seconds"));
  if (f.contains("cp"))
    std::printf("context parallel: %s over %d ranks, per step and rank %.2f MB sent in %.0f transfers; attention "
                "kernels %.2f s, %.2f s of waiting for the exchanges exposed\n",
                f.at("cp_mode").get<std::string>().c_str(), f.at("cp").get<int>(), num("cp_bytes_per_step") / 1e6,
                num("cp_transfers_per_step"), num("cp_attention_seconds"), num("cp_comm_exposed_seconds"));
  if (f.contains("ep"))
    std::printf("expert parallel: over %d ranks, per step and rank %.2f MB of token rows sent in %.0f all-to-alls; "
                "%.2f s of waiting for them (and their counts) exposed\n",
                f.at("ep").get<int>(), num("ep_bytes_per_step") / 1e6, num("ep_exchanges_per_step"),
                num("ep_comm_exposed_seconds"));
  if (f.contains("tp"))
    std::printf("tensor parallel: per step and rank %.2f MB all-reduced, %.2f MB all-gathered, %.2f MB "
                "reduce-scattered in %.0f collectives; they ran %.2f s, %.2f s of it exposed (%.0f%% hidden)\n",
                num("tp_allreduce_bytes_per_step") / 1e6, num("tp_allgather_bytes_per_step") / 1e6,
                num("tp_reduce_scatter_bytes_per_step") / 1e6, num("tp_collectives_per_step"),
                num("tp_comm_busy_seconds"), num("tp_comm_seconds"), 100.0 * num("tp_hidden_fraction"));
  if (f.contains("pp"))
    std::printf("pipeline: %s over %d ranks × %d stages, %d micro-batches; idle %.1f%% of this rank's pass time "
                "(simulated %.1f%% with equal stages, %.1f%% with the measured costs); %.2f MB sent per pass; "
                "measured unit costs (parallel.pp_unit_costs): %s\n",
                f.at("pp_schedule").get<std::string>().c_str(), f.at("pp").get<int>(), f.at("pp_virtual").get<int>(),
                f.at("pp_microbatches").get<int>(), 100.0 * num("pp_idle_share"), 100.0 * num("pp_simulated_bubble"),
                100.0 * num("pp_simulated_bubble_measured"), num("pp_bytes_sent_per_pass") / 1e6,
                f.value("pp_unit_costs", std::string("-")).c_str());
  if (f.contains("fsdp_gather_seconds"))
    std::printf("fully sharded: all-gather %.2f s, reduce-scatter %.2f s, %.2f s of it exposed (%.0f%% hidden); "
                "at most %lld units (%.1f MB) gathered at once\n",
                num("fsdp_gather_seconds"), num("fsdp_reduce_seconds"), num("fsdp_exposed_seconds"),
                100.0 * num("fsdp_hidden_fraction"), f.at("fsdp_gathered_units_peak").get<long long>(),
                num("fsdp_gathered_bytes_peak") / 1e6);
}

Peaks gather_peaks(World& world, ComputeDevice& dev, int64_t accounted_bytes) {
  const int R = world.size();
  const double mine[3] = {peak_rss_mb(), double(dev.peak_bytes()) / double(1 << 20),
                          double(accounted_bytes) / double(1 << 20)};
  Peaks p;
  p.by_rank.resize(size_t(3 * R));
  world.all().allgather(mine, p.by_rank.data(), 3, ElemType::f64);
  for (int r = 1; r < R; ++r) {
    if (p.rss_mb_of(r) > p.rss_mb()) p.rss_rank = r;
    if (p.by_rank[size_t(3 * r + 1)] > p.device_mb()) p.device_rank = r;
  }
  return p;
}

double known_peak_tflops(const std::string& device, Precision precision) {
  struct Known {
    const char* name;
    double bf16, f32;
  };
  // dense, SXM parts: bf16 tensor-core peak and the plain FP32 peak (dtrain's f32 uses no TF32)
  // (PCIe and NVL parts first: "H100" alone is the SXM part)
  static const Known known[] = {{"H100 PCIe", 756.0, 51.0}, {"H100 NVL", 835.0, 60.0}, {"H200", 989.0, 67.0},
                                {"H100", 989.0, 67.0},       {"A100", 312.0, 19.5}};
  for (const Known& k : known)
    if (device.find(k.name) != std::string::npos) return precision == Precision::bf16 ? k.bf16 : k.f32;
  return 0.0;
}

Json run_summary(const RunParts& r, const TrainerState& st, const EvalResult& test, const Peaks& peaks,
                 const MemoryAccount& memory, const Json& figures, int threads, double tps, double device_seconds) {
  const Model& model = r.par.model();
  const Metric metric = r.kind.metric();
  Json s = figures;
  s["test_loss"] = test.loss;
  s[metric == Metric::perplexity ? "test_ppl" : "test_accuracy"] = metric_value(metric, test);
  s["best_val_loss"] = std::isfinite(st.best_val) ? Json(st.best_val) : Json(nullptr);
  s["steps"] = st.global_step;
  s["train_tokens"] = st.train_tokens;
  s["train_tokens_per_s"] = tps;
  s["train_flops_per_token"] = model.train_flops_per_sample() / double(model.sample_shape().targets);
  s["peak_rss_mb"] = peaks.rss_mb();  // the largest of any rank's
  s["peak_rss_rank"] = peaks.rss_rank;
  Json by_rank = Json::array(), accounted = Json::array(), unaccounted = Json::array();
  for (int k = 0; k < r.world.size(); ++k) {
    by_rank.push_back(peaks.rss_mb_of(k));
    accounted.push_back(peaks.accounted_mb_of(k));
    unaccounted.push_back(peaks.rss_mb_of(k) - peaks.accounted_mb_of(k));
  }
  s["peak_rss_mb_by_rank"] = std::move(by_rank);
  s["accounted_mb_by_rank"] = std::move(accounted);      // each rank's MemoryAccount, MiB
  s["unaccounted_mb_by_rank"] = std::move(unaccounted);  // its peak RSS less its account
  s["device"] = r.dev.describe();
  s["peak_device_mb"] = peaks.device_mb();
  s["peak_device_rank"] = peaks.device_rank;
  s["train_device_seconds"] = device_seconds;
  s["threads"] = threads;
  s["world_size"] = r.world.size();  // ranks
  s["dp_size"] = r.dp;               // data-parallel ranks (replicas × shards)
  s["precision"] = r.cfg.train.precision;
  if (r.precision == Precision::bf16) s["bf16_products"] = r.dev.bf16_products();  // false: ran in f32
  s["model_kind"] = r.kind.name();
  s["parameters"] = model.num_params();
  // dtrain's own account of this rank's memory, part by part (MemoryAccount)
  memory.add_to(s);
  s["parameter_bytes"] = held_floats(model) * int64_t(sizeof(float));  // this rank's (a tensor-parallel slice)
  s["recompute"] = r.cfg.train.recompute;
  return s;
}

void print_run_start(const RunParts& r, int64_t steps_per_epoch, int threads) {
  const bool root = r.world.rank() == 0 && logs_at(LogLevel::info);
  if (root) print_setup(r, steps_per_epoch, threads);
  if (r.dev.kind() == DeviceKind::cpu) {
    const std::string line = describe_threads(r.world);
    if (root) std::printf("%s\n", line.c_str());
  }
  if (r.dp > 1) {
    const std::string where = r.world.layout();
    if (root) std::printf("workers: %s\n", where.c_str());
  }
}

void print_run_end(const RunParts& r, const TrainerState& st, const EvalResult& test, const Peaks& peaks,
                   const MemoryAccount& memory, const Json& figures, double tps) {
  const int R = r.world.size();
  const std::string of_rank =
      R > 1 ? " (rank " + std::to_string(peaks.rss_rank) + ", the most of " + std::to_string(R) + " ranks)" : "";
  const std::string unit = r.data.row_unit();
  const Metric metric = r.kind.metric();
  std::printf("Test loss: %.5f, test %s: %s (%lld %s); trained %lld steps at %.0f %s/s, peak memory %.0f MiB%s%s\n",
              test.loss, metric_name(metric).c_str(), metric_text(metric, test).c_str(), (long long)test.rows,
              unit.c_str(), (long long)st.global_step, tps, unit.c_str(), peaks.rss_mb(), of_rank.c_str(),
              peaks.device_mb() > 0 ? (", GPU " + std::to_string(int64_t(peaks.device_mb())) + " MiB").c_str() : "");
  if (!logs_at(LogLevel::info)) return;
  print_parallel_figures(figures);
  std::printf("memory of rank 0: peak %.0f MiB resident, %.0f MiB of it accounted (%s), %.0f MiB not\n",
              peaks.rss_mb_of(0), peaks.accounted_mb_of(0), memory.describe().c_str(),
              peaks.rss_mb_of(0) - peaks.accounted_mb_of(0));
}

}  // namespace dtrain
