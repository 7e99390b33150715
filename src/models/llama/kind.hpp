// model.kind = llama: a Llama-style decoder (RMSNorm, rotary positions, grouped-query attention,
// SwiGLU, no biases), under Hugging Face's tensor names. Its units: the shared TokenEmbedding (no
// positions), `layers` LlamaBlocks, the shared ClassifierHead (RMSNorm, no bias, tied or not).
#pragma once
#include <functional>
#include <memory>
#include <optional>

#include "models/llama/block.hpp"
#include "models/llama/config.hpp"
#include "nn/embed_head_shape.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

const ModelKind& llama_kind();
// The embedding's and head's shape and Hugging Face names (model.embed_tokens, model.norm, lm_head).
EmbedHeadShape llama_embed_head_shape(const LlamaConfig& c);
// Block i's feed-forward: dense SwiGLU (nullopt), or a mixture of experts (model.kind = moe).
using SparseBlocks = std::function<std::optional<SparseFeedForward>(int block)>;
UnitList llama_units(const LlamaConfig& c, ComputeDevice& device = cpu_device(), TpSlice slice = {},
                     TpRegions& regions = no_tp_regions(), SequenceAttention* sequence = nullptr,
                     const SparseBlocks& sparse = nullptr);

}  // namespace dtrain
