// model.kind = llama: a Llama-style decoder (RMSNorm, rotary positions, grouped-query attention,
// SwiGLU, no biases), under Hugging Face's tensor names. Its units: the shared TokenEmbedding (no
// positions), `layers` LlamaBlocks, the shared ClassifierHead (RMSNorm, no bias, tied or not).
#pragma once
#include <memory>

#include "models/llama/config.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

const ModelKind& llama_kind();
UnitList llama_units(const LlamaConfig& c, ComputeDevice& device = cpu_device(), TpSlice slice = {},
                     TpRegions& regions = no_tp_regions(), SequenceAttention* sequence = nullptr);

}  // namespace dtrain
