// Helpers for tests that drive a Transformer directly: token arrays as the batches a model reads.
#pragma once
#include "data/batch.hpp"
#include "models/transformer/kind.hpp"
#include "nn/model.hpp"

namespace dtrain {

// ctx.B windows of ctx.T tokens (targets may be null: a prediction).
inline BatchView token_batch(const int32_t* inputs, const int32_t* targets, const StepContext& ctx) {
  return {{InputKind::tokens, ctx.T, ctx.T}, ctx.B, inputs, targets};
}

}  // namespace dtrain
