// The Llama-style decoder's hyper-parameters (model.kind = llama): its model.* keys as a table, their
// validation, and the conversion from the generic ModelConfig. docs/model.md's Llama section says
// what each one means.
#pragma once
#include <cstdint>

#include "core/config_keys.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

struct LlamaConfig {
  int64_t vocab_size = 0;
  int64_t seq_len = 64;
  int64_t dim = 256;
  int64_t heads = 8;
  int64_t kv_heads = 0;  // 0: = heads (plain multi-head attention); otherwise divides heads
  int64_t layers = 4;
  int64_t ff_dim = 0;    // SwiGLU hidden width; 0: 8·dim/3 rounded up to a multiple of 256 (Meta's rule)
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  bool tied = false;
  float dropout = 0.0f;
  bool causal = true;

  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t head_dim() const { return dim / heads; }
  int64_t ff() const { return ff_dim > 0 ? ff_dim : (8 * dim / 3 + 255) / 256 * 256; }
  // Throws Error naming the bad key and the fix (vocab_size too unless it comes from the data).
  void validate(bool vocab_known = true) const;
  // What tensor parallelism over `slices` must divide: heads, kv_heads, the feed-forward width
  // (and the sequence under sequence parallel).
  void validate_tensor_parallel(int slices, bool sequence) const;
};

const ConfigKeyTable<LlamaConfig>& llama_keys();
LlamaConfig llama_config(const ModelConfig& c);

}  // namespace dtrain
