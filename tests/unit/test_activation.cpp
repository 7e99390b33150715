// Activations: ReLU, GELU and ReLU-from-dropped-output, forward and backward.
#include "kernel_test_util.hpp"

namespace {
double gelu_ref(double x) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
double gelu_grad_ref(double x) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846), u = c * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}
}  // namespace

TEST(Activation, ReluForwardBackward) {
  std::mt19937 g(40);
  const int64_t n = 1000;
  Vec x = randu(n, g, -3.0f, 3.0f), y(n), dy = randu(n, g), dx(n);
  activation_forward(Activation::relu, x.data(), y.data(), n);
  activation_backward(Activation::relu, x.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f) << i;
    ASSERT_EQ(dx[i], x[i] > 0 ? dy[i] : 0.0f) << i;
  }
  // finite differences away from the kink
  Vec xs = randu(50, g, 0.1f, 2.0f);
  for (size_t i = 0; i < xs.size(); i += 2) xs[i] = -xs[i];
  Vec ys(50), dys = randu(50, g), dxs(50);
  auto f = [&] {
    activation_forward(Activation::relu, xs.data(), ys.data(), 50);
    return dot(dys, ys);
  };
  activation_backward(Activation::relu, xs.data(), dys.data(), dxs.data(), 50);
  expect_grad(dxs, numeric_grad(xs, f, 1e-2f), 1e-3, "relu dx");
}

TEST(Activation, GeluForwardBackward) {
  std::mt19937 g(41);
  const int64_t n = 2000;
  Vec x = randu(n, g, -6.0f, 6.0f);
  x[0] = 0.0f;
  x[1] = 30.0f;
  x[2] = -30.0f;
  x[3] = 1e-4f;
  Vec y(n), dy = randu(n, g), dx(n);
  activation_forward(Activation::gelu, x.data(), y.data(), n);
  activation_backward(Activation::gelu, x.data(), dy.data(), dx.data(), n);
  DVec ry(n), rdx(n);
  for (int64_t i = 0; i < n; ++i) {
    ry[i] = gelu_ref(x[i]);
    rdx[i] = dy[i] * gelu_grad_ref(x[i]);
  }
  expect_close(y, ry, 1e-5, 1e-6, "gelu y");
  // f32 cancellation in 1 - tanh^2 near the tails: ~1e-6 absolute on a derivative of scale 1
  expect_close(dx, rdx, 1e-5, 4e-6, "gelu dx");

  // finite differences of the f32 kernel; in-place backward (dx aliases dy)
  Vec xs = randu(64, g, -4.0f, 4.0f), ys(64), dys = randu(64, g), dxs = dys;
  auto f = [&] {
    activation_forward(Activation::gelu, xs.data(), ys.data(), 64);
    return dot(dys, ys);
  };
  activation_backward(Activation::gelu, xs.data(), dxs.data(), dxs.data(), 64);
  expect_grad(dxs, numeric_grad(xs, f, 1e-2f), 1e-3, "gelu dx fd");

  // in-place forward
  Vec xi = x;
  activation_forward(Activation::gelu, xi.data(), xi.data(), n);
  EXPECT_EQ(xi, y);
}

// ReLU backward from its saved, dropped-out output: the gradient of dropout(relu(x)).
TEST(Activation, ReluBackwardFromDroppedOutput) {
  std::mt19937 g(42);
  DropoutSpec s;
  s.p = 0.3f;
  s.seed = 5;
  s.step = 2;
  s.unit = 1;
  s.site = 3;
  const int64_t samples = 2, per = 60, n = samples * per;
  Vec x = randu(n, g, 0.05f, 2.0f);
  for (int64_t i = 0; i < n; i += 3) x[i] = -x[i];  // away from the kink
  Vec y(n), dy = randu(n, g), dx(n);
  auto fwd = [&] {
    activation_forward(Activation::relu, x.data(), y.data(), n);
    dropout_forward(y.data(), y.data(), samples, per, s);
  };
  fwd();
  int64_t neg_kept = 0, pos_dropped = 0;
  std::vector<uint8_t> keep(per);
  for (int64_t b = 0; b < samples; ++b) {
    dropout_mask(s.stream(b), s.threshold(), 0, per, keep.data());
    for (int64_t i = 0; i < per; ++i) {
      neg_kept += x[b * per + i] < 0 && keep[i];
      pos_dropped += x[b * per + i] > 0 && !keep[i];
    }
  }
  ASSERT_GT(neg_kept, 0);  // both cases that zero the gradient occur
  ASSERT_GT(pos_dropped, 0);
  Vec dxa = dy;  // in place
  relu_backward_from_output(y.data(), dxa.data(), dxa.data(), n, s.scale());
  auto f = [&] {
    fwd();
    return dot(dy, y);
  };
  expect_grad(dxa, numeric_grad(x, f, 1e-2f), 1e-3, "dx");
  // without dropout it is the plain ReLU backward
  activation_forward(Activation::relu, x.data(), y.data(), n);
  relu_backward_from_output(y.data(), dy.data(), dx.data(), n, 1.0f);
  Vec ref(n);
  activation_backward(Activation::relu, x.data(), dy.data(), ref.data(), n);
  EXPECT_EQ(dx, ref);
}
