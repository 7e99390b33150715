// MemoryAccount (see memory_account.hpp).
#include "train/report/memory_account.hpp"

#include <cstdio>

#include "metrics/proc_stats.hpp"
#include "train/report/run_report.hpp"

namespace dtrain {

MemoryAccount model_memory(ParallelModel& par) {
  const Model& model = par.model();
  const FullyShardedDataParallel* fsdp = par.fsdp();
  MemoryAccount a;
  a.model_state =
      (fsdp ? fsdp->shard_bytes() : 2 * held_floats(model) * int64_t(sizeof(float)) + model.bf16_weight_bytes()) +
      par.optimizer().state_bytes();
  a.gather_buffers = fsdp ? fsdp->pool_bytes() + fsdp->grad_pool_bytes() : 0;
  a.activations = int64_t(model.activation_bytes());
  if (ContextParallel* cp = par.context_parallel()) a.context_buffers = int64_t(cp->buffer_bytes());
  return a;
}

MemoryAccount memory_account(const RunParts& r, size_t save_buffers, int64_t start_rss) {
  MemoryAccount a = model_memory(r.par);
  a.kernel_scratch = int64_t(r.dev.kernel_scratch_bytes());
  a.comm_buffers = int64_t(r.mesh.buffer_bytes());
  a.save_buffers = int64_t(save_buffers);
  a.at_start = start_rss;
  return a;
}

void MemoryAccount::add_to(Json& s) const {
  s["model_state_bytes"] = model_state;
  s["gather_buffer_bytes"] = gather_buffers;
  s["activation_bytes"] = activations;
  s["kernel_scratch_bytes"] = kernel_scratch;
  s["comm_buffer_bytes"] = comm_buffers;
  s["context_buffer_bytes"] = context_buffers;
  s["save_buffer_bytes"] = save_buffers;
  s["start_rss_bytes"] = at_start;
  s["accounted_bytes"] = total();
}

std::string MemoryAccount::describe() const {
  const std::pair<int64_t, const char*> parts[] = {
      {model_state, "model state"},       {gather_buffers, "gather buffers"}, {activations, "activations"},
      {kernel_scratch, "kernel scratch"}, {comm_buffers, "comm buffers"},     {context_buffers, "context-parallel buffers"},
      {save_buffers, "save buffers"},
      {at_start, "process at start"}};
  std::string s;
  for (const auto& [bytes, name] : parts) {
    if (bytes == 0) continue;
    char b[64];
    std::snprintf(b, sizeof b, "%s%.1f MiB %s", s.empty() ? "" : " + ", double(bytes) / double(1 << 20), name);
    s += b;
  }
  return s;
}

int64_t resident_bytes() {
  const std::optional<std::string> text = read_proc_file("/proc/self/status");
  if (!text) return 0;
  const ProcStatus st = parse_proc_status(*text);
  return st.rss_mb ? int64_t(*st.rss_mb * double(1 << 20)) : 0;
}

}  // namespace dtrain
