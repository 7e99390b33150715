// Grow-only scratch buffers for kernels that need temporary space: sized on the first step,
// reused afterwards, so the step loop does not allocate.
#pragma once
#include <cstdint>

namespace dtrain {

enum class ScratchSlot { layernorm, rmsnorm, classifier, attention, attention_grad, rope, count };

// A buffer of at least n floats for this slot (contents undefined / zeroed).
float* scratch(ScratchSlot slot, int64_t n);
float* scratch_zeroed(ScratchSlot slot, int64_t n);

}  // namespace dtrain
