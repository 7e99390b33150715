// model.kind = moe: the Llama-style decoder whose feed-forward is, in every moe_every-th block, a
// mixture of experts (nn/moe_layer.hpp), under Qwen3-MoE's tensor names (model.layers.N.mlp.gate,
// model.layers.N.mlp.experts.M.{gate,up,down}_proj; dense blocks keep Llama's mlp names).
#pragma once
#include "models/moe/config.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

const ModelKind& moe_kind();
UnitList moe_units(const MoeConfig& c, ComputeDevice& device = cpu_device(), TpSlice slice = {},
                   TpRegions& regions = no_tp_regions(), SequenceAttention* sequence = nullptr, ExpertExchange* experts = nullptr);

}  // namespace dtrain
