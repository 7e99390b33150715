// The threads of `dtrain data prepare --tokenizer`: a reader fills numbered chunks under a memory budget,
// N workers encode them in any order, the calling thread writes them in order (the same bytes at any N).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>

#include "data/doc_chunk.hpp"
#include "data/memory_budget.hpp"

namespace dtrain {

struct ChunkPipeline {
  int workers = 1;
  MemoryBudget* budget = nullptr;                  // each chunk holds chunk_budget_bytes() until written
  const std::atomic<uint64_t>* input_read = nullptr;  // input bytes read so far: each chunk's input_done
  std::function<void(ChunkBuilder&)> read;         // on the reader thread: every piece, in order
  std::function<void(Chunk&)> encode;              // on a worker
  std::function<void(Chunk&)> write;               // on the calling thread, chunk after chunk in order
};

// Runs the pipeline to its end. The first error in input order (a chunk's encoding error, the
// reader's error after the chunks before it, or the writer's) stops every thread and is rethrown.
void run_chunk_pipeline(const ChunkPipeline& p);

}  // namespace dtrain
