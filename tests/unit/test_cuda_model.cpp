// The whole model on the GPU against the CPU: same weights and batch give the same loss and
// gradients (f32), and 50 AdamW steps with dropout track the CPU's loss curve. Skipped without
// a GPU.
#include <random>

#include "gpu_test_util.hpp"
#include "model_test_util.hpp"
#include "optim/optimizer.hpp"

using namespace dtrain;

namespace {

TransformerConfig small_model(bool pre_norm) {
  return tiny_transformer({.vocab = 97, .seq_len = 16, .dim = 32, .heads = 4, .layers = 2, .ff_dim = 64,
                           .dropout = 0.1f, .pre_norm = pre_norm,
                           .activation = pre_norm ? Activation::gelu : Activation::relu, .tied = pre_norm});
}

std::vector<int32_t> tokens(size_t n, uint32_t seed, int32_t V) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(g() % uint32_t(V));
  return t;
}

StepContext train_ctx(const TransformerConfig& c, int64_t B, uint64_t seed, int step) {
  StepContext ctx;
  ctx.B = B;
  ctx.T = c.seq_len;
  ctx.training = true;
  ctx.dropout = c.dropout;
  ctx.seed = seed;
  ctx.step = uint32_t(step);
  ctx.loss_scale = 1.0f / float(B * c.seq_len);
  return ctx;
}

std::vector<float> all_grads(Model& m) {
  std::vector<float> out;
  for (Unit* u : m.units()) {
    std::vector<float> g(size_t(u->numel()));
    m.device().download(g.data(), u->grad_data(), sizeof(float) * g.size());
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

}  // namespace

TEST(CudaModel, OneStepMatchesTheCpu) {
  NEED_GPU();
  for (bool pre : {false, true}) {
    const TransformerConfig c = small_model(pre);
    const int64_t B = 4;
    Model cpu(transformer_units(c), B), gpu(transformer_units(c, G), B, G);
    cpu.init_weights(3);
    gpu.init_weights(3);
    const auto in = tokens(B * c.seq_len, 1, int32_t(c.vocab_size)), tg = tokens(B * c.seq_len, 2, int32_t(c.vocab_size));
    const StepContext ctx = train_ctx(c, B, 9, 0);
    cpu.zero_grad();
    gpu.zero_grad();
    const double lc = cpu.forward_backward(token_batch(in.data(), tg.data(), ctx), ctx);
    const double lg = gpu.forward_backward(token_batch(in.data(), tg.data(), ctx), ctx);
    EXPECT_NEAR(lg, lc, 1e-5 * std::fabs(lc)) << (pre ? "pre-norm" : "post-norm") << " loss";
    gpu_test::expect_close(all_grads(cpu), all_grads(gpu), 1e-4, pre ? "pre-norm gradients" : "post-norm gradients");
  }
}

TEST(CudaModel, FiftyAdamWStepsTrackTheCpuLossCurve) {
  NEED_GPU();
  const TransformerConfig c = small_model(false);
  const int64_t B = 8;
  Model cpu(transformer_units(c), B), gpu(transformer_units(c, G), B, G);
  cpu.init_weights(5);
  gpu.init_weights(5);
  OptimizerConfig oc;
  oc.lr = 3e-3f;
  Optimizer ocpu(oc, unit_shards(cpu.units())), ogpu(oc, unit_shards(gpu.units()), G);
  double worst = 0.0, first = 0.0, last = 0.0;
  for (int step = 0; step < 50; ++step) {
    const auto in = tokens(B * c.seq_len, 100 + step, 20), tg = in;  // a learnable copy task
    const StepContext ctx = train_ctx(c, B, 1, step);
    cpu.zero_grad();
    gpu.zero_grad();
    const double lc = cpu.forward_backward(token_batch(in.data(), tg.data(), ctx), ctx) / double(B * c.seq_len);
    const double lg = gpu.forward_backward(token_batch(in.data(), tg.data(), ctx), ctx) / double(B * c.seq_len);
    ocpu.step(oc.lr);
    ogpu.step(oc.lr);
    worst = std::max(worst, std::fabs(lc - lg) / lc);
    if (step == 0) first = lc;
    last = lc;
  }
  EXPECT_LT(last, 0.8 * first) << "the model did not learn: the comparison would be empty";
  EXPECT_LT(worst, 2e-3) << "GPU loss left the CPU curve by a relative " << worst;
}
