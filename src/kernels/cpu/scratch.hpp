// Grow-only scratch buffers for kernels that need temporary space: sized on the first step,
// reused afterwards, so the step loop does not allocate.
#pragma once
#include <cstdint>

namespace dtrain {

enum class ScratchSlot { layernorm, rmsnorm, classifier, attention, attention_grad, rope, count };

// A buffer of at least n floats for this slot (contents undefined / zeroed).
float* scratch(ScratchSlot slot, int64_t n);
float* scratch_zeroed(ScratchSlot slot, int64_t n);
// Bytes the slots hold now (what the kernels keep for themselves between calls).
int64_t scratch_bytes();

}  // namespace dtrain
