// Token embedding plus positions (a learned table or the fixed sinusoidal one), forward and backward.
#pragma once
#include <cstdint>

namespace dtrain {

// table[T, d]: P[t, 2i] = sin(t / 10000^(2i/d)), P[t, 2i+1] = cos(...)
void sinusoidal_table(float* table, int64_t T, int64_t d);

// out[b*T + t, :] = wte[tokens[b*T + t], :] + pos[t, :]
void embedding_forward(const int32_t* tokens, const float* wte, const float* pos, float* out,
                       int64_t B, int64_t T, int64_t d);
// dwte[tok] += dout row; dpos[t] += sum over b (dpos may be null for fixed positions).
void embedding_backward(const int32_t* tokens, const float* dout, float* dwte, float* dpos,
                        int64_t B, int64_t T, int64_t d);

}  // namespace dtrain
