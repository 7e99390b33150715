// Token embedding plus positions (a learned table or the fixed sinusoidal one), forward and backward.
#pragma once
#include <cstdint>

namespace dtrain {

// table[T, d]: P[t, 2i] = sin(t / 10000^(2i/d)), P[t, 2i+1] = cos(...)
void sinusoidal_table(float* table, int64_t T, int64_t d);

// A vocabulary-parallel embedding holds the rows [vocab_begin, vocab_begin + vocab_count) of the
// table (wte's row 0 is word vocab_begin); words outside give zero rows. One process: 0 and V.
struct VocabRange {
  int64_t begin = 0, count = 0;
  bool holds(int32_t w) const { return w >= begin && w < begin + count; }
};

// out[b*T + t, :] = wte[tokens[b*T + t] - begin, :] (zero outside the range) + pos[t, :] (pos null: none)
void embedding_forward(const int32_t* tokens, const float* wte, const float* pos, float* out,
                       int64_t B, int64_t T, int64_t d, VocabRange range);
// dwte[tok - begin] += dout row for words in the range; dpos[t] += sum over b (dpos may be null).
void embedding_backward(const int32_t* tokens, const float* dout, float* dwte, float* dpos,
                        int64_t B, int64_t T, int64_t d, VocabRange range);

}  // namespace dtrain
