// The CUDA kernels on activations kept in bf16 (train.precision = bf16) against the CPU's, through the
// one ComputeDevice interface: dropout and SwiGLU writing bf16 (the same 16 bits, or one bf16 step
// apart where the f32 values differ in their last bits), ReLU's backward reading bf16, products
// with a bf16 operand within bf16 tolerance of the f32 ones, attention with its qkv and
// probabilities kept in bf16, and GELU and SwiGLU reading bf16 inputs. Without a GPU each test says
// skipped.

#include "bf16_test_util.hpp"
#include "gpu_test_util.hpp"

using namespace dtrain;
using gpu_test::expect_close;
using gpu_test::OnDevice;
using gpu_test::rand_vec;

TEST(CudaBf16, DropoutWritesTheCpusBits) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t samples = 5, per = 4099;
  const auto x = rand_vec(samples * per, 12, -2.0f, 2.0f);
  DropoutSpec s;
  s.p = 0.3f;
  s.seed = 99;
  s.step = 2;
  s.unit = 3;
  s.site = 3;
  for (DropoutSpec d : {s, DropoutSpec{}}) {
    std::vector<uint16_t> y(x.size()), none(x.size(), 0xffff);
    OnDevice<float> X(G, x);
    OnDevice<uint16_t> Y(G, none);
    C.dropout_forward(x.data(), y.data(), samples, per, d);
    G.dropout_forward(X.p(), Y.p(), samples, per, d);
    EXPECT_EQ(Y.host(), y) << (d.active() ? "dropout on" : "dropout off");  // a product and a rounding alike
  }
}

TEST(CudaBf16, SwigluWritesItsF32ResultRounded) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t rows = 97, f = 301;
  const auto a = rand_vec(rows * 2 * f, 34, -6, 6);
  std::vector<float> y(rows * f);
  std::vector<uint16_t> none(rows * f, 0xffff);
  OnDevice<float> A(G, a), Y32(G, y);
  OnDevice<uint16_t> Y(G, none);
  C.swiglu_forward(a.data(), y.data(), rows, f);
  G.swiglu_forward(A.p(), Y.p(), rows, f);
  G.swiglu_forward(A.p(), Y32.p(), rows, f);
  EXPECT_EQ(Y.host(), rounded(Y32.host()));   // the GPU's own f32 result, rounded
  expect_close(y, widened(Y.host()), 8e-3, "swiglu bf16 against the CPU's f32");
}

TEST(CudaBf16, ReluBackwardReadsBf16) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const int64_t n = 5003;
  auto yf = rand_vec(n, 40, -2, 2);
  for (int64_t i = 0; i < n; i += 5) yf[i] = 0.0f;
  const std::vector<uint16_t> y = rounded(yf);
  const auto dy = rand_vec(n, 41);
  std::vector<float> dx(n);
  OnDevice<uint16_t> Y(G, y);
  OnDevice<float> DY(G, dy), DX(G, dx);
  C.relu_backward_from_output(y.data(), dy.data(), dx.data(), n, 1.25f);
  G.relu_backward_from_output(Y.p(), DY.p(), DX.p(), n, 1.25f);
  expect_close(dx, DX.host(), 0.0, "relu backward from bf16");
}

TEST(CudaBf16, ProductsWithABf16Operand) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  if (!C.bf16_products()) GTEST_SKIP() << "this CPU computes bf16 products in f32: no bf16 reference here";
  const int64_t M = 37, N = 53, K = 129;
  const auto A = rand_vec(M * K, 1), B = rand_vec(K * N, 2), bias = rand_vec(N, 3);
  const std::vector<uint16_t> A16 = rounded(A);
  const MatmulArgs args = linear_forward_args(M, K, N, nullptr, Precision::bf16);
  std::vector<float> ref(M * N), out(M * N);
  C.matmul(A.data(), B.data(), ref.data(), linear_forward_args(M, K, N, nullptr, Precision::f32));
  OnDevice<uint16_t> dA(G, A16);
  OnDevice<float> dB(G, B), dC(G, out);
  G.matmul(dA.p(), dB.p(), dC.p(), args);
  expect_close(ref, dC.host(), 2e-2, "matmul, A kept in bf16");
  // and the CPU's product of the same bf16 operand: both bf16 products of the same values
  C.matmul(A16.data(), B.data(), out.data(), args);
  expect_close(out, dC.host(), 1e-5, "matmul, A kept in bf16, against the CPU's bf16 product");
  // a Linear's backward with its input kept in bf16
  const int64_t rows = M, in = K, outf = N;
  const auto dy = rand_vec(rows * outf, 5), W = rand_vec(outf * in, 6);
  std::vector<float> dW(outf * in, 0.0f), dx(rows * in), dWc = dW, dxc = dx;
  OnDevice<float> DY(G, dy), W_(G, W), DW(G, dW), DX(G, dx);
  C.linear_backward(A16.data(), dy.data(), W.data(), dWc.data(), dxc.data(), rows, in, outf, false, Precision::bf16);
  G.linear_backward(dA.p(), DY.p(), W_.p(), DW.p(), DX.p(), rows, in, outf, false, Precision::bf16);
  expect_close(dWc, DW.host(), 1e-5, "linear backward dW, x kept in bf16");
  expect_close(dxc, DX.host(), 1e-2, "linear backward dx");
}

// Attention with qkv and probabilities kept in bf16: the stored probabilities are the GPU's own f32
// ones rounded; the output and dqkv lie within bf16 tolerance of those of f32 storage (the same bf16
// products), and of the CPU's bf16 attention on the same bf16 storage.
TEST(CudaBf16, AttentionKeepsQkvAndProbabilitiesInBf16) {
  NEED_GPU();
  ComputeDevice& C = cpu_device();
  const AttentionShape s{3, 17, 4, 8, true, Precision::bf16, 2};
  const int64_t rows = s.B * s.T, np = s.B * s.H * s.T * s.T, d = s.H * s.Dh;
  const auto qkv = rand_vec(rows * s.row_width(), 21, -2, 2), dout = rand_vec(rows * d, 22);
  const std::vector<uint16_t> qkv16 = rounded(qkv);
  DropoutSpec drop;
  drop.p = 0.2f;
  drop.seed = 5;
  drop.site = 1;
  std::vector<float> out(rows * d), probs(np), dqkv(rows * s.row_width());
  std::vector<uint16_t> none(np, 0xffff);
  OnDevice<float> QKV(G, qkv), OUT(G, out), P(G, probs), DOUT(G, dout), DQKV(G, dqkv), OUT16(G, out), DQKV16(G, dqkv);
  OnDevice<uint16_t> QKV16(G, qkv16), P16(G, none);
  G.attention_forward(QKV16.p(), OUT.p(), P.p(), s, drop);  // qkv kept in bf16, probabilities in f32
  G.attention_backward(DOUT.p(), QKV16.p(), P.p(), DQKV.p(), s, drop);
  G.attention_forward(QKV16.p(), OUT16.p(), P16.p(), s, drop);  // both in bf16
  G.attention_backward(DOUT.p(), QKV16.p(), P16.p(), DQKV16.p(), s, drop);
  EXPECT_EQ(P16.host(), rounded(P.host()));
  expect_close(OUT.host(), OUT16.host(), 2e-2, "attention out, probabilities kept in bf16");
  expect_close(DQKV.host(), DQKV16.host(), 3e-2, "attention dqkv, probabilities kept in bf16");
  if (!C.bf16_products()) return;  // no bf16 reference on this CPU
  std::vector<uint16_t> p16(np);
  C.attention_forward(qkv16.data(), out.data(), p16.data(), s, drop);
  C.attention_backward(dout.data(), qkv16.data(), p16.data(), dqkv.data(), s, drop);
  expect_close(out, OUT16.host(), 2e-2, "attention out against the CPU's, both kept in bf16");
  expect_close(dqkv, DQKV16.host(), 3e-2, "attention dqkv against the CPU's, both kept in bf16");
}

// GELU and SwiGLU reading inputs kept in bf16: the GPU's own f32 kernels' bits on the widened values.
TEST(CudaBf16, ActivationsReadTheirInputsInBf16) {
  NEED_GPU();
  const int64_t rows = 53, f = 301, n = rows * f;
  const std::vector<uint16_t> x16 = rounded(rand_vec(n, 50, -5, 5)), a16 = rounded(rand_vec(2 * n, 51, -6, 6));
  const std::vector<float> x = widened(x16), a = widened(a16), dy = rand_vec(n, 52), zero(2 * n, 0.0f);
  OnDevice<uint16_t> X16(G, x16), A16(G, a16);
  OnDevice<float> X(G, x), A(G, a), DY(G, dy), WANT(G, zero), GOT(G, zero);
  G.activation_forward(Activation::gelu, X.p(), WANT.p(), n);
  G.activation_forward(Activation::gelu, X16.p(), GOT.p(), n);
  EXPECT_EQ(GOT.host(), WANT.host()) << "gelu forward";
  G.activation_backward(Activation::gelu, X.p(), DY.p(), WANT.p(), n);
  G.activation_backward(Activation::gelu, X16.p(), DY.p(), GOT.p(), n);
  EXPECT_EQ(GOT.host(), WANT.host()) << "gelu backward";
  G.swiglu_forward(A.p(), WANT.p(), rows, f);
  G.swiglu_forward(A16.p(), GOT.p(), rows, f);
  EXPECT_EQ(GOT.host(), WANT.host()) << "swiglu forward";
  G.swiglu_backward(A.p(), DY.p(), WANT.p(), rows, f);
  G.swiglu_backward(A16.p(), DY.p(), GOT.p(), rows, f);
  EXPECT_EQ(GOT.host(), WANT.host()) << "swiglu backward";
}

// Gradients kept in bf16: each element-wise backward writes its f32 result rounded, and the bias sum
// of a bf16 gradient is the f32 sum of its values.
TEST(CudaBf16, GradientsKeptInBf16AreTheF32ResultRounded) {
  NEED_GPU();
  const int64_t rows = 47, f = 263, n = rows * f;
  const std::vector<uint16_t> x16 = rounded(rand_vec(n, 60, -5, 5)), a16 = rounded(rand_vec(2 * n, 61, -6, 6));
  const std::vector<float> dy = rand_vec(n, 62), zero(2 * n, 0.0f), bias0 = rand_vec(2 * f, 63);
  const std::vector<uint16_t> zero16(2 * n, 0);
  OnDevice<uint16_t> X16(G, x16), A16(G, a16), GOT(G, zero16);
  OnDevice<float> DY(G, dy), WANT(G, zero);
  auto rounded_want = [&] { return rounded(WANT.host()); };
  G.activation_backward(Activation::gelu, X16.p(), DY.p(), WANT.p(), n);
  G.activation_backward(Activation::gelu, X16.p(), DY.p(), GOT.p(), n);
  EXPECT_EQ(GOT.host(), rounded_want()) << "gelu backward";
  G.relu_backward_from_output(X16.p(), DY.p(), WANT.p(), n, 1.25f);
  G.relu_backward_from_output(X16.p(), DY.p(), GOT.p(), n, 1.25f);
  EXPECT_EQ(GOT.host(), rounded_want()) << "ReLU backward from its output";
  G.swiglu_backward(A16.p(), DY.p(), WANT.p(), rows, f);
  G.swiglu_backward(A16.p(), DY.p(), GOT.p(), rows, f);
  EXPECT_EQ(GOT.host(), rounded_want()) << "swiglu backward";
  OnDevice<float> WIDE(G, widened(GOT.host())), FROM_F32(G, bias0), FROM_BF16(G, bias0);
  G.colsum_accumulate(WIDE.p(), FROM_F32.p(), rows, 2 * f);
  G.colsum_accumulate(GOT.p(), FROM_BF16.p(), rows, 2 * f);
  EXPECT_EQ(FROM_BF16.host(), FROM_F32.host()) << "bias sum";
}
