// model.kind = transformer: the course's Transformer language model and its GPT-2-style variants
// (docs/model.md). Its units: TokenEmbedding, `layers` Blocks, ClassifierHead.
#pragma once
#include <memory>

#include "models/transformer/config.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

const ModelKind& transformer_kind();

// Every unit of a Transformer (declared, not planned): slice `slice` under tensor parallelism.
UnitList transformer_units(const TransformerConfig& c, ComputeDevice& device = cpu_device(), TpSlice slice = {},
                           TpRegions& regions = no_tp_regions(), SequenceAttention* sequence = nullptr);
// A Transformer built and planned in one call (tests, tools, benchmarks): see Model's constructor.
std::unique_ptr<Model> build_transformer(const TransformerConfig& c, int64_t max_batch,
                                         ComputeDevice& device = cpu_device(),
                                         ParamStorage storage = ParamStorage::owned, TpSlice slice = {},
                                         TpRegions& regions = no_tp_regions(), StagePlan stages = {});

}  // namespace dtrain
