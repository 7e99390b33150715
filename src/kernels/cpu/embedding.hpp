// Token embedding plus positions (a learned table or the fixed sinusoidal one), forward and backward.
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// (VocabRange and the sinusoidal table: kernels/types.hpp.)

// out[b*T + t, :] = wte[tokens[b*T + t] - begin, :] (zero outside the range) + pos[t, :] (pos null: none)
void embedding_forward(const int32_t* tokens, const float* wte, const float* pos, float* out,
                       int64_t B, int64_t T, int64_t d, VocabRange range);
// dwte[tok - begin] += dout row for words in the range; dpos[t] += sum over b (dpos may be null).
void embedding_backward(const int32_t* tokens, const float* dout, float* dwte, float* dpos,
                        int64_t B, int64_t T, int64_t d, VocabRange range);

}  // namespace dtrain
