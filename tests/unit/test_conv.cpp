// Convolution and max pooling (kernels/cpu/conv, oneDNN): forward, the input gradient and the
// accumulated weight and bias gradients against direct double-precision loops, in f32 and bf16, for
// MNIST's shapes and for stride, padding and odd sizes; max pooling routes each window's gradient to
// its maximum; the chain conv → ReLU → conv → ReLU → pooling in the device's layout, ReLU fused, computes
// what the NCHW chain computes.
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "kernels/cpu/conv.hpp"
#include "kernels/cpu/matmul.hpp"

using namespace kernel_test;

namespace {

// x [N,C,H,W] (double loops, zero padding)
DVec ref_conv(const Vec& x, const Vec& w, const Vec& b, const ConvShape& s) {
  DVec y(size_t(s.output_floats()));
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t p = 0; p < s.P(); ++p)
        for (int64_t q = 0; q < s.Q(); ++q) {
          double acc = b[size_t(k)];
          for (int64_t c = 0; c < s.C; ++c)
            for (int64_t r = 0; r < s.R; ++r)
              for (int64_t t = 0; t < s.S; ++t) {
                const int64_t h = p * s.stride - s.pad + r, v = q * s.stride - s.pad + t;
                if (h < 0 || h >= s.H || v < 0 || v >= s.W) continue;
                acc += double(x[size_t(((n * s.C + c) * s.H + h) * s.W + v)]) * w[size_t(((k * s.C + c) * s.R + r) * s.S + t)];
              }
          y[size_t(((n * s.K + k) * s.P() + p) * s.Q() + q)] = acc;
        }
  return y;
}

// the adjoints: dx and dw (+ db) of sum(y · dy)
void ref_conv_backward(const Vec& x, const Vec& w, const Vec& dy, const ConvShape& s, DVec& dx, DVec& dw, DVec& db) {
  dx.assign(size_t(s.input_floats()), 0.0);
  dw.assign(size_t(s.weight_floats()), 0.0);
  db.assign(size_t(s.K), 0.0);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t p = 0; p < s.P(); ++p)
        for (int64_t q = 0; q < s.Q(); ++q) {
          const double g = dy[size_t(((n * s.K + k) * s.P() + p) * s.Q() + q)];
          db[size_t(k)] += g;
          for (int64_t c = 0; c < s.C; ++c)
            for (int64_t r = 0; r < s.R; ++r)
              for (int64_t t = 0; t < s.S; ++t) {
                const int64_t h = p * s.stride - s.pad + r, v = q * s.stride - s.pad + t;
                if (h < 0 || h >= s.H || v < 0 || v >= s.W) continue;
                const size_t xi = size_t(((n * s.C + c) * s.H + h) * s.W + v), wi = size_t(((k * s.C + c) * s.R + r) * s.S + t);
                dx[xi] += g * w[wi];
                dw[wi] += g * x[xi];
              }
        }
}

ConvShape shape(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S, int64_t stride, int64_t pad) {
  ConvShape s;
  s.N = N, s.C = C, s.H = H, s.W = W, s.K = K, s.R = R, s.S = S, s.stride = stride, s.pad = pad;
  return s;
}

Vec rounded(Vec v) {  // what bf16 compute sees
  for (float& x : v) x = to_f32(to_bf16(x));
  return v;
}

}  // namespace

TEST(Conv, ForwardAndBothGradientsMatchDirectLoops) {
  std::mt19937 g(7);
  const ConvShape shapes[] = {shape(3, 1, 28, 28, 8, 3, 3, 1, 0), shape(2, 8, 26, 26, 6, 3, 3, 1, 0),
                              shape(2, 3, 9, 7, 4, 3, 2, 2, 1), shape(1, 5, 6, 6, 7, 1, 1, 1, 0)};
  for (const ConvShape& s : shapes)
    for (Precision prec : {Precision::f32, Precision::bf16}) {
      const std::string what = std::to_string(s.N) + "×" + std::to_string(s.C) + "×" + std::to_string(s.H) + "×" +
                               std::to_string(s.W) + " * " + std::to_string(s.K) + "×" + std::to_string(s.R) + "×" +
                               std::to_string(s.S) + (prec == Precision::bf16 ? " bf16" : " f32");
      const Vec x = randu(size_t(s.input_floats()), g), w = randu(size_t(s.weight_floats()), g),
                b = randu(size_t(s.K), g), dy = randu(size_t(s.output_floats()), g);
      // bf16 multiplies bf16-rounded inputs exactly and accumulates in f32; a CPU without bf16
      // products (no avx512: oneDNN has no bf16 convolution there) computes it in f32 instead
      const bool bf16 = prec == Precision::bf16 && matmul_bf16_available();
      const Vec xr = bf16 ? rounded(x) : x, wr = bf16 ? rounded(w) : w, dyr = bf16 ? rounded(dy) : dy;
      const double tol = 2e-5;
      Vec y(size_t(s.output_floats()));
      conv2d_forward(x.data(), w.data(), b.data(), y.data(), s, prec);
      expect_close(y, ref_conv(xr, wr, b, s), tol, tol, what + " forward");
      DVec dx_ref, dw_ref, db_ref;
      ref_conv_backward(xr, wr, dyr, s, dx_ref, dw_ref, db_ref);
      Vec dx(size_t(s.input_floats()), 99.0f);  // overwritten
      conv2d_backward_input(dy.data(), w.data(), dx.data(), s, prec);
      expect_close(dx, dx_ref, tol, tol, what + " input gradient");
      // weight and bias gradients accumulate: twice is 2×
      Vec dw(size_t(s.weight_floats()), 0.0f), db(size_t(s.K), 0.0f);
      conv2d_backward_weight(x.data(), dy.data(), dw.data(), db.data(), s, prec);
      conv2d_backward_weight(x.data(), dy.data(), dw.data(), db.data(), s, prec);
      for (double& v : dw_ref) v *= 2.0;
      for (double& v : db_ref) v *= 2.0;
      expect_close(dw, dw_ref, tol, 1e-4, what + " weight gradient");
      expect_close(db, db_ref, bf16 ? 1e-2 : tol, 1e-4, what + " bias gradient");  // bf16: dy rounded
    }
}

TEST(Conv, MaxPoolingRoutesEachWindowsGradientToItsMaximum) {
  std::mt19937 g(3);
  for (const auto& [H, W, k] : {std::tuple{24, 24, 2}, std::tuple{7, 9, 3}, std::tuple{5, 5, 2}}) {
    PoolShape s;
    s.N = 2, s.C = 3, s.H = H, s.W = W, s.kernel = s.stride = k;
    const Vec x = randu(size_t(s.input_floats()), g), dy = randu(size_t(s.output_floats()), g);
    std::vector<uint8_t> ws(maxpool_workspace_bytes(s));
    Vec y(size_t(s.output_floats())), dx(size_t(s.input_floats()), 99.0f);
    maxpool_forward(x.data(), y.data(), ws.data(), s);
    maxpool_backward(x.data(), y.data(), dy.data(), dx.data(), ws.data(), s);
    Vec dx_ref(size_t(s.input_floats()), 0.0f);
    for (int64_t n = 0; n < s.N * s.C; ++n)
      for (int64_t p = 0; p < s.P(); ++p)
        for (int64_t q = 0; q < s.Q(); ++q) {
          int64_t best = -1;  // windows that do not fit are left out (PyTorch's floor mode)
          for (int64_t r = 0; r < k; ++r)
            for (int64_t t = 0; t < k; ++t) {
              const int64_t i = (n * H + p * k + r) * W + q * k + t;
              if (best < 0 || x[size_t(i)] > x[size_t(best)]) best = i;
            }
          const size_t o = size_t((n * s.P() + p) * s.Q() + q);
          EXPECT_EQ(y[o], x[size_t(best)]);
          dx_ref[size_t(best)] += dy[o];
        }
    EXPECT_EQ(dx, dx_ref) << H << "×" << W << " pool " << k;
  }
}

namespace {

// conv → ReLU → conv → ReLU → max pooling, forward and backward (ReLU's from its output), with every
// activation between the pixels and the pooled output in `layout`: the ReLUs fused into the
// convolutions in the device's layout, run apart on NCHW. Returns the pooled output, the pixels' convolution's
// gradients and the second convolution's.
struct ChainResult {
  Vec pooled, dw1, db1, dw2, db2;
};
ChainResult run_chain(ImageLayout layout, ConvShape c1, ConvShape c2, PoolShape ps, const Vec& x, const Vec& w1,
                      const Vec& b1, const Vec& w2, const Vec& b2, const Vec& dpooled, Precision prec) {
  const bool device = layout == ImageLayout::device;
  c1.y_layout = c2.x_layout = c2.y_layout = ps.x_layout = layout;
  c1.relu = c2.relu = device;
  auto relu = [](Vec& v) {
    for (float& f : v) f = f > 0.0f ? f : 0.0f;
  };
  auto relu_backward = [](const Vec& y, Vec& dy) {  // element by element: any layout
    for (size_t i = 0; i < y.size(); ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  };
  Vec y1(size_t(c1.output_floats())), y2(size_t(c2.output_floats()));
  ChainResult r{Vec(size_t(ps.output_floats())), Vec(w1.size()), Vec(b1.size()), Vec(w2.size()), Vec(b2.size())};
  conv2d_forward(x.data(), w1.data(), b1.data(), y1.data(), c1, prec);
  if (!device) relu(y1);
  conv2d_forward(y1.data(), w2.data(), b2.data(), y2.data(), c2, prec);
  if (!device) relu(y2);
  std::vector<uint8_t> ws(maxpool_workspace_bytes(ps));
  maxpool_forward(y2.data(), r.pooled.data(), ws.data(), ps);
  Vec d2(y2.size()), d1(y1.size());
  maxpool_backward(y2.data(), r.pooled.data(), dpooled.data(), d2.data(), ws.data(), ps);
  relu_backward(y2, d2);
  conv2d_backward_input(d2.data(), w2.data(), d1.data(), c2, prec);
  conv2d_backward_weight(y1.data(), d2.data(), r.dw2.data(), r.db2.data(), c2, prec);
  relu_backward(y1, d1);
  conv2d_backward_weight(x.data(), d1.data(), r.dw1.data(), r.db1.data(), c1, prec);
  return r;
}

}  // namespace

// The course network's chain kept in the device's layout from the first convolution's output through
// pooling, ReLU inside the convolutions, computes what the NCHW chain with ReLU apart computes: the
// same numbers (the same kernels run; the layouts only save reorders). Channels the CPU's block does
// not divide (6) stay NCHW.
TEST(Conv, DeviceLayoutThroughPoolingMatchesTheNchwChain) {
  std::mt19937 g(11);
  for (const auto& [K1, K2] : {std::pair{32, 64}, std::pair{6, 16}})
    for (Precision prec : {Precision::f32, Precision::bf16}) {
      const ConvShape c1 = shape(3, 1, 14, 14, K1, 3, 3, 1, 0), c2 = shape(3, K1, 12, 12, K2, 3, 3, 1, 0);
      PoolShape ps;
      ps.N = 3, ps.C = K2, ps.H = ps.W = 10, ps.kernel = ps.stride = 2;
      const Vec x = randu(size_t(c1.input_floats()), g), w1 = randu(size_t(c1.weight_floats()), g),
                b1 = randu(size_t(K1), g), w2 = randu(size_t(c2.weight_floats()), g), b2 = randu(size_t(K2), g),
                dp = randu(size_t(ps.output_floats()), g);
      const ChainResult a = run_chain(ImageLayout::nchw, c1, c2, ps, x, w1, b1, w2, b2, dp, prec);
      const ChainResult b = run_chain(ImageLayout::device, c1, c2, ps, x, w1, b1, w2, b2, dp, prec);
      const std::string what = std::to_string(K1) + "/" + std::to_string(K2) + (prec == Precision::bf16 ? " bf16" : " f32");
      EXPECT_EQ(a.pooled, b.pooled) << what;
      EXPECT_EQ(a.dw2, b.dw2) << what;
      EXPECT_EQ(a.db2, b.db2) << what;
      EXPECT_EQ(a.dw1, b.dw1) << what;
      EXPECT_EQ(a.db1, b.db1) << what;
      double nonzero = 0;
      for (float v : a.dw1) nonzero += v != 0.0f;
      EXPECT_GT(nonzero, 0.9 * double(a.dw1.size())) << what;  // the gradients reached the first convolution
    }
}
