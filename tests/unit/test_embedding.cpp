// Embedding and sinusoidal positions, forward and backward with repeated tokens.
#include "kernel_test_util.hpp"

TEST(Embedding, SinusoidalTable) {
  const int64_t T = 9, d = 10;
  Vec P(T * d);
  sinusoidal_table(P.data(), T, d);
  DVec ref(T * d);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < d / 2; ++i) {
      const double a = double(t) / std::pow(10000.0, 2.0 * double(i) / double(d));
      ref[t * d + 2 * i] = std::sin(a);
      ref[t * d + 2 * i + 1] = std::cos(a);
    }
  expect_close(P, ref, 0.0, 1e-7, "P");
  EXPECT_EQ(P[0], 0.0f);
  EXPECT_EQ(P[1], 1.0f);
  EXPECT_NEAR(P[1 * d + 0], std::sin(1.0), 1e-7);
  EXPECT_NEAR(P[3 * d + 3], std::cos(3.0 / std::pow(10000.0, 2.0 / 10.0)), 1e-7);
}

TEST(Embedding, ForwardBackwardWithRepeatedTokens) {
  std::mt19937 g(50);
  const int64_t B = 3, T = 4, d = 40, V = 6;  // d spans two 32-column tiles
  std::vector<int32_t> tok = {1, 3, 1, 1, 5, 0, 3, 3, 1, 2, 2, 5};
  Vec wte = randu(V * d, g), pos = randu(T * d, g), out(B * T * d);
  embedding_forward(tok.data(), wte.data(), pos.data(), out.data(), B, T, d, {0, V});
  DVec ref(B * T * d);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t i = 0; i < d; ++i) ref[r * d + i] = double(wte[tok[r] * d + i]) + pos[(r % T) * d + i];
  expect_close(out, ref, 1e-6, 0.0, "out");

  Vec dout = randu(B * T * d, g);
  Vec dwte0 = randu(V * d, g), dwte = dwte0, dpos0 = randu(T * d, g), dpos = dpos0;
  embedding_backward(tok.data(), dout.data(), dwte.data(), dpos.data(), B, T, d, {0, V});
  for (size_t i = 0; i < dwte.size(); ++i) dwte[i] -= dwte0[i];  // accumulates
  for (size_t i = 0; i < dpos.size(); ++i) dpos[i] -= dpos0[i];
  auto f = [&] {
    embedding_forward(tok.data(), wte.data(), pos.data(), out.data(), B, T, d, {0, V});
    return dot(dout, out);
  };
  const DVec nw = numeric_grad(wte, f, 1e-2f), np = numeric_grad(pos, f, 1e-2f);
  expect_grad(dwte, nw, 1e-4, "dwte");
  expect_grad(dpos, np, 1e-4, "dpos");
  for (int64_t i = 0; i < d; ++i) EXPECT_EQ(dwte[4 * d + i], 0.0f) << "token 4 is unused";

  // fixed positions: dpos null
  Vec dw2(V * d);
  embedding_backward(tok.data(), dout.data(), dw2.data(), nullptr, B, T, d, {0, V});
  expect_close(dw2, nw, 1e-4, 1e-5, "dwte without dpos");
}

// Vocabulary slices: each holds rows [begin, begin + count) of the table; the slices' outputs
// (positions added by one of them) sum to the whole embedding, and their gradients are the whole
// gradient's rows.
TEST(Embedding, VocabularySlicesSumToTheWhole) {
  std::mt19937 g(51);
  const int64_t B = 2, T = 5, d = 8, V = 6;
  std::vector<int32_t> tok = {0, 5, 2, 3, 3, 1, 4, 5, 0, 2};
  Vec wte = randu(V * d, g), pos = randu(T * d, g), whole(B * T * d), dout = randu(B * T * d, g);
  embedding_forward(tok.data(), wte.data(), pos.data(), whole.data(), B, T, d, {0, V});
  Vec dwhole(V * d);
  embedding_backward(tok.data(), dout.data(), dwhole.data(), nullptr, B, T, d, {0, V});
  Vec sum(B * T * d, 0.0f);
  for (int64_t s = 0; s < 3; ++s) {  // 3 slices of 2 words
    Vec part(B * T * d), dpart(2 * d);
    embedding_forward(tok.data(), wte.data() + s * 2 * d, s == 0 ? pos.data() : nullptr, part.data(), B, T, d,
                      {s * 2, 2});
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    embedding_backward(tok.data(), dout.data(), dpart.data(), nullptr, B, T, d, {s * 2, 2});
    for (int64_t i = 0; i < 2 * d; ++i) EXPECT_EQ(dpart[i], dwhole[s * 2 * d + i]) << "slice " << s;
  }
  for (size_t i = 0; i < sum.size(); ++i) EXPECT_FLOAT_EQ(sum[i], whole[i]) << i;
}
