// dtrain's account of one rank's host memory, part by part: what it planned and allocated itself,
// what its kernels, process groups and saves keep, and the process before the run. Peak RSS less
// the account is what nothing accounts for (bench/memory_accounting.sh compares it across layouts).
#pragma once
#include <cstdint>
#include <string>

#include "core/json.hpp"
#include "train/report/run_parts.hpp"

namespace dtrain {

struct MemoryAccount {
  // parameters (and their bf16 copy), gradients, optimizer state (this rank's shards under FSDP)
  int64_t model_state = 0;
  int64_t gather_buffers = 0;  // FSDP's gather and gradient pools
  int64_t activations = 0;     // the model's planned block: activations, stage buffers, scratch, the batch
  int64_t kernel_scratch = 0;  // what the kernels keep between calls (sized by the first step's shapes)
  int64_t comm_buffers = 0;    // the process groups' working space
  int64_t context_buffers = 0; // context parallel's exchange buffers (ring blocks, all-to-all shares)
  int64_t save_buffers = 0;    // what checkpoint saves held beside the model, at most
  int64_t at_start = 0;        // the process's resident memory before the run: code, libraries
  int64_t total() const {
    return model_state + gather_buffers + activations + kernel_scratch + comm_buffers + context_buffers + save_buffers +
           at_start;
  }
  // summary.json's keys: model_state_bytes, gather_buffer_bytes, activation_bytes,
  // kernel_scratch_bytes, comm_buffer_bytes, context_buffer_bytes, save_buffer_bytes, start_rss_bytes,
  // accounted_bytes.
  void add_to(Json& summary) const;
  // "455.1 MB state + 68.5 MB activations + …" (parts that are not zero)
  std::string describe() const;
};

// What the parallel model's parts planned and took (model state, gather buffers, activations,
// context-parallel buffers): the same numbers for a run and for the planner, which builds them alike.
MemoryAccount model_memory(ParallelModel& par);

// This rank's account now (after the run: the kernels' scratch and the groups' working space are
// sized by then). save_buffers: RunSaver::buffer_bytes(); start_rss: at_start, in bytes.
MemoryAccount memory_account(const RunParts& r, size_t save_buffers, int64_t start_rss);

// This process's resident memory now, in bytes (0 when /proc cannot say).
int64_t resident_bytes();

}  // namespace dtrain
