// Tensor parallelism against one process, on 2 and 4 local ranks: the vocabulary-parallel loss and
// its gradient equal the whole classifier's (a padded last slice included); a sliced model's
// initial weights are the one-process weights sliced, and its loss, gradients, per-row losses
// (evaluation) and logits (generation) equal the one-process model's, with and without sequence
// parallel, post-norm and pre-norm with a tied head, dropout on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "comm_test_util.hpp"
#include "kernels/cpu/cross_entropy.hpp"  // the CPU kernel over vocabulary slices
#include "model_test_util.hpp"
#include "parallel/tp/grads.hpp"
#include "parallel/tp/regions.hpp"

using namespace dtrain;
using dist_test::env_for;
using dist_test::failures;
using dist_test::run_ranks;

namespace {

constexpr Millis kTimeout(30000);

std::vector<float> random_vec(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

// |a - b| ≤ tol · (1 + |b|) everywhere.
void check_close(const float* a, const float* b, size_t n, double tol, const std::string& what) {
  for (size_t i = 0; i < n; ++i)
    RANK_CHECK(std::fabs(double(a[i]) - double(b[i])) <= tol * (1.0 + std::fabs(double(b[i]))),
               what + " differs at " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(b[i]));
}

void vocabulary_parallel_loss(int P, int64_t V) {  // V words: the last slices are padded
  const int64_t N = 1100, d = 16;  // several chunks of rows, the last ragged
  const auto x = random_vec(size_t(N * d), 1), W = random_vec(size_t(V * d), 2), bias = random_vec(size_t(V), 3);
  std::vector<int32_t> targets(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) targets[size_t(i)] = int32_t((i * 7 + 3) % V);
  auto rs = run_ranks(P, [&](int r, int port) {
    World w(env_for(r, P, port, "test-token"), kTimeout);
    // the whole classifier, in each rank
    std::vector<float> dx(static_cast<size_t>(N * d)), dW(static_cast<size_t>(V * d)), db(static_cast<size_t>(V)),
        rows(static_cast<size_t>(N));
    ClassifierArgs whole{x.data(), W.data(), bias.data(), targets.data(), N, d, V};
    whole.grad_scale = 0.5f;
    whole.dx = dx.data();
    whole.dW = dW.data();
    whole.dbias = db.data();
    double right = 0.0, slice_right = 0.0;  // the rows whose argmax is their target
    whole.correct = &right;
    const double loss = classifier_cross_entropy(whole, rows.data());
    // this rank's slice of ceil(V / P) classifier rows, zero past the end
    const int64_t Vl = (V + P - 1) / P, v0 = r * Vl, words = std::clamp<int64_t>(V - v0, 0, Vl);
    std::vector<float> Ws(size_t(Vl * d), 0.0f), bs(size_t(Vl), 0.0f);
    std::copy(W.begin() + v0 * d, W.begin() + (v0 + words) * d, Ws.begin());
    std::copy(bias.begin() + v0, bias.begin() + v0 + words, bs.begin());
    std::vector<float> sdx(static_cast<size_t>(N * d)), sdW(static_cast<size_t>(Vl * d)), sdb(static_cast<size_t>(Vl)),
        srows(static_cast<size_t>(N));
    TensorParallelRegions regions(w.all(), false);
    ClassifierArgs part{x.data(), Ws.data(), bs.data(), targets.data(), N, d, Vl};
    part.vocab_begin = v0;
    part.words = words;
    part.combine = &regions;
    part.grad_scale = 0.5f;
    part.dx = sdx.data();
    part.dW = sdW.data();
    part.dbias = sdb.data();
    part.correct = &slice_right;
    const double sloss = classifier_cross_entropy(part, srows.data());
    RANK_CHECK(slice_right == right, "right predictions " + std::to_string(slice_right) + " vs " + std::to_string(right));
    RANK_CHECK(std::fabs(sloss - loss) <= 1e-5 * std::fabs(loss),
               "loss " + std::to_string(sloss) + " vs " + std::to_string(loss));
    check_close(srows.data(), rows.data(), rows.size(), 1e-5, "row loss");
    w.all().allreduce(sdx.data(), sdx.size());  // each slice's part of the input gradient
    check_close(sdx.data(), dx.data(), dx.size(), 1e-5, "dx");
    check_close(sdW.data(), dW.data() + v0 * d, size_t(words * d), 1e-5, "dW");
    check_close(sdb.data(), db.data() + v0, size_t(words), 1e-5, "dbias");
    for (int64_t i = words * d; i < Vl * d; ++i) RANK_CHECK(sdW[size_t(i)] == 0.0f, "padding got a gradient");
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "") << P << " slices of " << V << " words";
}

TransformerConfig small_config(bool pre_norm) {
  return tiny_transformer({.vocab = 23, .seq_len = 8, .dim = 16, .heads = 4, .layers = 2, .ff_dim = 32,
                           .dropout = 0.1f, .pre_norm = pre_norm,
                           .activation = pre_norm ? Activation::gelu : Activation::relu, .tied = pre_norm});
}

// Every parameter of the sliced model against the whole model's: values or gradients (grad).
void check_params(Model& sliced, Model& whole, bool grad, double tol) {
  for (size_t k = 0; k < sliced.units().size(); ++k) {
    const Unit& s = *sliced.units()[k];
    const Unit& u = *whole.units()[k];
    for (size_t i = 0; i < s.params().size(); ++i) {
      const ParamInfo& p = s.params()[i];
      const float* mine = (grad ? s.grad_data() : s.param_data()) + p.offset;
      const float* ref = (grad ? u.grad_data() : u.param_data()) + u.params()[i].offset;
      for (int64_t e = 0; e < p.numel(); ++e) {
        const int64_t g = p.global_element(e);
        const float want = g < 0 ? 0.0f : ref[g];
        RANK_CHECK(std::fabs(double(mine[e]) - double(want)) <= tol * (1.0 + std::fabs(double(want))),
                   p.name + (grad ? " gradient" : "") + " differs at element " + std::to_string(e));
      }
    }
  }
}

void sliced_model(int P, bool sequence, bool pre_norm) {
  const TransformerConfig c = small_config(pre_norm);
  const int64_t B = 3, T = c.seq_len, rows = B * T;
  std::vector<int32_t> in(static_cast<size_t>(rows)), tgt(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    in[size_t(i)] = int32_t((i * 5 + 1) % c.vocab_size);
    tgt[size_t(i)] = int32_t((i * 3 + 2) % c.vocab_size);
  }
  auto rs = run_ranks(P, [&](int r, int port) {
    World w(env_for(r, P, port, "test-token"), kTimeout);
    StepContext ctx;
    ctx.B = B;
    ctx.T = T;
    ctx.training = true;
    ctx.dropout = c.dropout;
    ctx.seed = 7;
    ctx.step = 3;
    ctx.loss_scale = 1.0f / float(rows);
    Model whole(transformer_units(c), B);
    whole.init_weights(11);
    whole.zero_grad();
    const double loss = whole.forward_backward(token_batch(in.data(), tgt.data(), ctx), ctx);

    TensorParallelRegions regions(w.all(), sequence);
    Model sliced(transformer_units(c, cpu_device(), TpSlice{P, r, sequence}, regions), B, cpu_device(), ParamStorage::owned);
    sliced.init_weights(11);
    check_params(sliced, whole, false, 0.0);  // the one-process initial values, sliced
    sliced.zero_grad();
    const double sloss = sliced.forward_backward(token_batch(in.data(), tgt.data(), ctx), ctx);
    RANK_CHECK(std::fabs(sloss - loss) <= 1e-5 * std::fabs(loss),
               "loss " + std::to_string(sloss) + " vs " + std::to_string(loss));
    std::vector<ShardOf> where;
    for (Unit* u : sliced.units()) where.push_back({u, 0});
    TensorParallelGrads grads(w.all(), unit_shards(sliced.units()), where, cpu_device());
    grads.finish_gradients();  // the norms' rows' shares summed (sequence parallel)
    check_params(sliced, whole, true, 1e-4);

    // evaluation (per-row losses) and generation (every logit)
    std::vector<float> rows_whole(static_cast<size_t>(rows)), rows_sliced(static_cast<size_t>(rows));
    whole.forward_loss(token_batch(in.data(), tgt.data(), ctx), ctx, rows_whole.data());
    sliced.forward_loss(token_batch(in.data(), tgt.data(), ctx), ctx, rows_sliced.data());
    check_close(rows_sliced.data(), rows_whole.data(), size_t(rows), 1e-5, "evaluation row loss");
    std::vector<float> lw(static_cast<size_t>(rows * c.vocab_size)), ls(lw.size());
    whole.predict(token_batch(in.data(), nullptr, ctx), ctx, lw.data());
    sliced.predict(token_batch(in.data(), nullptr, ctx), ctx, ls.data());
    check_close(ls.data(), lw.data(), lw.size(), 1e-5, "logit");
    w.shutdown();
  });
  EXPECT_EQ(failures(rs), "") << P << " slices, sequence parallel " << sequence << ", pre-norm " << pre_norm;
}

}  // namespace

TEST(TensorParallel, VocabularyParallelLossAndGradientEqualTheWholeClassifiers) {
  vocabulary_parallel_loss(2, 23);
  vocabulary_parallel_loss(4, 23);
  vocabulary_parallel_loss(4, 9);  // slices of 3: the last one all padding
}

TEST(TensorParallel, SlicedPostNormModelEqualsOneProcess) {
  sliced_model(2, false, false);
  sliced_model(4, false, false);
}

TEST(TensorParallel, SequenceParallelPostNormModelEqualsOneProcess) { sliced_model(2, true, false); }

TEST(TensorParallel, SequenceParallelPreNormTiedGeluModelEqualsOneProcess) {
  sliced_model(2, true, true);
  sliced_model(4, true, true);
}

TEST(TensorParallel, IndivisibleLayoutsAreNamed) {
  TransformerConfig c = small_config(false);
  auto message = [&](int slices, bool sequence) {
    try {
      c.validate_tensor_parallel(slices, sequence);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(3, false).find("does not divide model.heads = 4"), std::string::npos) << message(3, false);
  c.heads = 8;
  c.ff_dim = 36;
  EXPECT_NE(message(8, false).find("does not divide model.ff_dim = 36"), std::string::npos) << message(8, false);
  c.ff_dim = 32;
  c.seq_len = 6;
  EXPECT_NE(message(4, true).find("does not divide model.seq_len = 6"), std::string::npos) << message(4, true);
  EXPECT_EQ(message(4, false), "");  // the vocabulary (23) need not divide: its last slice is padded
}
