// Kernels on activations kept in bf16 (train.precision = bf16): a kernel that writes one gives the bits
// of its f32 result rounded to nearest even; one that reads one gives the bits of its f32 form on the
// rounded values; a product with a bf16 operand is the bf16 product of the f32 operands.
#include <bit>
#include <cmath>
#include <cstring>

#include "bf16_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/cpu/swiglu.hpp"

namespace {

DropoutSpec spec() {
  DropoutSpec s;
  s.p = 0.3f;
  s.seed = 17;
  s.step = 4;
  s.unit = 2;
  s.site = 3;
  s.sample_offset = 7;
  return s;
}

}  // namespace

TEST(Bf16Kernels, DropoutWritesItsF32ResultRounded) {
  std::mt19937 g(3);
  const int64_t samples = 3, per = 9000;  // several 4096-element pieces per sample
  const Vec x = randu(samples * per, g, -3.0f, 3.0f);
  for (DropoutSpec s : {spec(), DropoutSpec{}}) {
    Vec y(x.size());
    std::vector<uint16_t> h(x.size(), 0xffff);
    dropout_forward(x.data(), y.data(), samples, per, s);
    dropout_forward(x.data(), h.data(), samples, per, s);
    EXPECT_EQ(h, rounded(y)) << (s.active() ? "dropout on" : "dropout off");
  }
  // a tensor-parallel tile: columns [100, 1100) of rows that are 3000 wide
  DropoutSpec s = spec();
  s.global_cols = 3000;
  s.col_offset = 100;
  Vec y(samples * 1000);
  std::vector<uint16_t> h(y.size());
  dropout_forward(x.data(), y.data(), samples, 1000, s);
  dropout_forward(x.data(), h.data(), samples, 1000, s);
  EXPECT_EQ(h, rounded(y));
  EXPECT_NE(std::count(y.begin(), y.end(), 0.0f), 0);  // the mask dropped some
  // from x kept in bf16 (probabilities): the f32 dropout of the widened values, rounded
  const std::vector<uint16_t> x16 = rounded(x);
  for (DropoutSpec t : {s, DropoutSpec{}}) {
    Vec want(samples * 1000);
    std::vector<uint16_t> got(want.size());
    dropout_forward(widened(x16).data(), want.data(), samples, 1000, t);
    dropout_forward(x16.data(), got.data(), samples, 1000, t);
    EXPECT_EQ(got, rounded(want)) << "from bf16, " << (t.active() ? "a tile" : "dropout off");
  }
}

TEST(Bf16Kernels, SwigluWritesItsF32ResultRounded) {
  std::mt19937 g(4);
  const int64_t rows = 37, f = 300;
  const Vec a = randu(rows * 2 * f, g, -6.0f, 6.0f);
  Vec y(rows * f);
  std::vector<uint16_t> h(y.size());
  swiglu_forward(a.data(), y.data(), rows, f);
  swiglu_forward(a.data(), h.data(), rows, f);
  EXPECT_EQ(h, rounded(y));
}

TEST(Bf16Kernels, ReluBackwardReadsTheRoundedOutputsSigns) {
  std::mt19937 g(5);
  const int64_t n = 5000;
  Vec y = randu(n, g, -2.0f, 2.0f);
  for (int64_t i = 0; i < n; i += 7) y[i] = 0.0f;  // dropped
  const std::vector<uint16_t> h = rounded(y);
  const Vec dy = randu(n, g);
  Vec want(n), got(n);
  relu_backward_from_output(widened(h).data(), dy.data(), want.data(), n, 1.25f);
  relu_backward_from_output(h.data(), dy.data(), got.data(), n, 1.25f);
  EXPECT_EQ(got, want);
  EXPECT_NE(std::count(got.begin(), got.end(), 0.0f), 0);
}

// A bf16 operand makes the product bf16 (also when the arguments say f32): the bits of the bf16 product
// of the f32 operands it was rounded from. Where this CPU has no bf16 products, the bits of the f32
// product of the rounded values.
TEST(Bf16Kernels, AProductWithABf16OperandIsTheBf16Product) {
  std::mt19937 g(6);
  const int64_t M = 33, N = 20, K = 47;
  const Vec A = randu(M * K, g), B = randu(K * N, g), bias = randu(N, g);
  const std::vector<uint16_t> A16 = rounded(A), B16 = rounded(B);
  const Vec A16_wide = widened(A16), B16_wide = widened(B16);  // kept: operands below point into them
  const bool native = matmul_copies_to_bf16(linear_forward_args(M, K, N, nullptr, Precision::bf16));
  for (Precision p : {Precision::f32, Precision::bf16}) {
    const MatmulArgs args = linear_forward_args(M, K, N, bias.data(), p);
    MatmulArgs ref = args;
    ref.precision = Precision::bf16;
    Vec want(M * N);
    if (native)
      matmul(A.data(), B.data(), want.data(), ref);
    else
      matmul(A16_wide.data(), B16_wide.data(), want.data(), linear_forward_args(M, K, N, bias.data(), Precision::f32));
    for (int which = 0; which < 3; ++which) {
      Vec got(M * N);
      const Operand a = which != 1 ? Operand(A16.data()) : Operand(native ? A.data() : A16_wide.data());
      const Operand b = which != 0 ? Operand(B16.data()) : Operand(native ? B.data() : B16_wide.data());
      matmul(a, b, got.data(), args);
      EXPECT_EQ(got, want) << "operands kept in bf16: " << (which == 0 ? "A" : which == 1 ? "B" : "both")
                           << ", arguments " << (p == Precision::bf16 ? "bf16" : "f32");
    }
  }
}

// linear_backward with its input x kept in bf16: the bits of the bf16 backward from the f32 x.
TEST(Bf16Kernels, LinearBackwardReadsItsInputInBf16) {
  if (!matmul_copies_to_bf16(linear_forward_args(16, 16, 16, nullptr, Precision::bf16)))
    GTEST_SKIP() << "this CPU has no bf16 matrix products (oneDNN computes them in f32 here)";
  std::mt19937 g(7);
  const int64_t rows = 29, in = 24, out = 40;
  const Vec x = randu(rows * in, g), dy = randu(rows * out, g), W = randu(out * in, g), dW0 = randu(out * in, g);
  const std::vector<uint16_t> x16 = rounded(x);
  for (bool accumulate : {false, true}) {
    Vec dW1 = dW0, dx1(rows * in, 0.5f), dW2 = dW0, dx2(rows * in, 0.5f);
    const Precision p = Precision::bf16;
    linear_backward(x.data(), dy.data(), W.data(), dW1.data(), dx1.data(), rows, in, out, accumulate, p);
    linear_backward(x16.data(), dy.data(), W.data(), dW2.data(), dx2.data(), rows, in, out, accumulate, p);
    EXPECT_EQ(dW2, dW1) << "accumulate " << accumulate;
    EXPECT_EQ(dx2, dx1) << "accumulate " << accumulate;
    EXPECT_NE(dW2, dW0);
    // the output gradient kept in bf16 and the weights' bf16 copy: the same products, the same bits
    Vec dW3 = dW0, dx3(rows * in, 0.5f);
    const std::vector<uint16_t> dy16 = rounded(dy), W16 = rounded(W);
    linear_backward(x16.data(), dy16.data(), W16.data(), dW3.data(), dx3.data(), rows, in, out, accumulate, p);
    EXPECT_EQ(dW3, dW1) << "accumulate " << accumulate;
    EXPECT_EQ(dx3, dx1) << "accumulate " << accumulate;
  }
}

// Gradients kept in bf16 (those only products and a bias sum read): each element-wise backward
// writes its f32 result rounded, and the bias sum of a bf16 gradient is the f32 sum of its values.
TEST(Bf16Kernels, GradientsKeptInBf16AreTheF32ResultRounded) {
  std::mt19937 g(11);
  const int64_t rows = 37, f = 260, n = rows * f;
  const std::vector<uint16_t> x16 = rounded(randu(n, g, -5.0f, 5.0f)), a16 = rounded(randu(2 * n, g, -6.0f, 6.0f));
  Vec dy = randu(n, g);
  // NaNs whose bits rounding would carry into a zero or an infinity stay NaN
  const uint32_t nans[] = {0x7fffffffu, 0xffffffffu, 0x7f800001u};
  for (int i = 0; i < 3; ++i) dy[size_t(5 + i)] = std::bit_cast<float>(nans[i]);
  for (Activation act : {Activation::gelu, Activation::relu}) {
    Vec want(n);
    std::vector<uint16_t> got(n);
    activation_backward(act, x16.data(), dy.data(), want.data(), n);
    activation_backward(act, x16.data(), dy.data(), got.data(), n);
    EXPECT_EQ(got, rounded(want)) << "activation backward";
    if (act == Activation::gelu) {
      for (int i : {5, 6, 7}) EXPECT_TRUE(std::isnan(widened(got)[size_t(i)])) << "element " << i;
    }
    relu_backward_from_output(x16.data(), dy.data(), want.data(), n, 1.25f);
    relu_backward_from_output(x16.data(), dy.data(), got.data(), n, 1.25f);
    EXPECT_EQ(got, rounded(want)) << "ReLU backward from its output";
  }
  Vec da(2 * n);
  std::vector<uint16_t> da16(2 * n);
  swiglu_backward(a16.data(), dy.data(), da.data(), rows, f);
  swiglu_backward(a16.data(), dy.data(), da16.data(), rows, f);
  EXPECT_EQ(da16, rounded(da)) << "SwiGLU backward";
  const Vec wide = widened(da16), bias0 = randu(2 * f, g);
  Vec from_f32 = bias0, from_bf16 = bias0;
  colsum_accumulate(wide.data(), from_f32.data(), rows, 2 * f);
  colsum_accumulate(da16.data(), from_bf16.data(), rows, 2 * f);
  EXPECT_EQ(std::memcmp(from_bf16.data(), from_f32.data(), sizeof(float) * from_f32.size()), 0)
      << "bias sum (bit for bit: its NaNs too)";
  EXPECT_NE(from_bf16, bias0);
}

// Attention in bf16 (bf16 products, f32 softmax): qkv kept in bf16 gives the bits of qkv kept in f32
// (the products round it either way); probabilities kept in bf16 are the f32 ones rounded, and what
// follows from them (the output through dropout, every gradient) lies within bf16 tolerance of the
// f32-kept run, which lies within it of f32 attention. A forward for the probabilities only gives
// the same bits (selective recompute).
TEST(Bf16Kernels, AttentionKeepsQkvAndProbabilitiesInBf16) {
  if (!matmul_copies_to_bf16(linear_forward_args(16, 16, 16, nullptr, Precision::bf16)))
    GTEST_SKIP() << "this CPU has no bf16 matrix products (oneDNN computes them in f32 here)";
  std::mt19937 g(8);
  AttentionShape s{2, 24, 4, 8, true, Precision::bf16, 2};
  const int64_t rows = s.B * s.T, np = attention_scores_floats(s);
  const Vec qkv = randu(rows * s.row_width(), g, -2.0f, 2.0f), dout = randu(rows * s.H * s.Dh, g);
  const std::vector<uint16_t> qkv16 = rounded(qkv);
  DropoutSpec drop = spec();
  drop.p = 0.2f;
  struct Run {
    Vec out, probs, dqkv;
    std::vector<uint16_t> probs16;
  };
  auto run = [&](Operand x, bool probs_bf16, Precision p) {
    AttentionShape sp = s;
    sp.precision = p;
    Run r{Vec(rows * s.H * s.Dh), Vec(np), Vec(rows * s.row_width()), std::vector<uint16_t>(np)};
    const ActBuffer probs = probs_bf16 ? ActBuffer(r.probs16.data()) : ActBuffer(r.probs.data());
    attention_forward(x, r.out.data(), probs, sp, drop);
    attention_backward(dout.data(), x, probs, r.dqkv.data(), sp, drop);
    return r;
  };
  const Run f32 = run(qkv.data(), false, Precision::f32), want = run(qkv.data(), false, Precision::bf16);
  expect_close(want.out, f32.out, 2e-2, 2e-2, "bf16 attention's output against f32");
  expect_close(want.dqkv, f32.dqkv, 3e-2, 3e-2, "bf16 attention's dqkv against f32");
  const Run kept16 = run(qkv16.data(), false, Precision::f32);  // a bf16 operand makes it bf16
  EXPECT_EQ(kept16.out, want.out);
  EXPECT_EQ(kept16.probs, want.probs);
  EXPECT_EQ(kept16.dqkv, want.dqkv);
  const Run both = run(qkv16.data(), true, Precision::bf16);
  EXPECT_EQ(both.probs16, rounded(want.probs));
  expect_close(both.out, want.out, 1e-2, 1e-2, "output, probabilities kept in bf16");
  expect_close(both.dqkv, want.dqkv, 2e-2, 2e-2, "dqkv, probabilities kept in bf16");
  EXPECT_NE(both.dqkv, want.dqkv);  // softmax's backward read the rounded probabilities
  std::vector<uint16_t> again(np);
  attention_forward(qkv16.data(), nullptr, again.data(), s, drop);
  EXPECT_EQ(again, both.probs16);
  drop.p = 0.0f;  // dropout off: the products read the probabilities kept in bf16 as they are
  const Run plain = run(qkv.data(), false, Precision::bf16), plain16 = run(qkv16.data(), true, Precision::bf16);
  EXPECT_EQ(plain16.probs16, rounded(plain.probs));
  expect_close(plain16.out, plain.out, 1e-2, 1e-2, "output, probabilities kept in bf16, no dropout");
  expect_close(plain16.dqkv, plain.dqkv, 2e-2, 2e-2, "dqkv, probabilities kept in bf16, no dropout");
}

// GELU (forward and backward) and SwiGLU (forward and backward) reading inputs kept in bf16: the bits
// of their f32 forms on the widened values.
TEST(Bf16Kernels, ActivationsReadTheirInputsInBf16) {
  std::mt19937 g(9);
  const int64_t rows = 41, f = 300, n = rows * f;
  const std::vector<uint16_t> x16 = rounded(randu(n, g, -5.0f, 5.0f)), a16 = rounded(randu(2 * n, g, -6.0f, 6.0f));
  const Vec x = widened(x16), a = widened(a16), dy = randu(n, g);
  for (Activation act : {Activation::gelu, Activation::relu}) {
    Vec want(n), got(n);
    activation_forward(act, x.data(), want.data(), n);
    activation_forward(act, x16.data(), got.data(), n);
    EXPECT_EQ(got, want) << "forward";
    activation_backward(act, x.data(), dy.data(), want.data(), n);
    activation_backward(act, x16.data(), dy.data(), got.data(), n);
    EXPECT_EQ(got, want) << "backward";
  }
  Vec y(n), y_got(n), da(2 * n), da_got(2 * n);
  std::vector<uint16_t> y16(n), y16_got(n);
  swiglu_forward(a.data(), y.data(), rows, f);
  swiglu_forward(a16.data(), y_got.data(), rows, f);
  EXPECT_EQ(y_got, y);
  swiglu_forward(a.data(), y16.data(), rows, f);
  swiglu_forward(a16.data(), y16_got.data(), rows, f);
  EXPECT_EQ(y16_got, y16);
  swiglu_backward(a.data(), dy.data(), da.data(), rows, f);
  swiglu_backward(a16.data(), dy.data(), da_got.data(), rows, f);
  EXPECT_EQ(da_got, da);
}
