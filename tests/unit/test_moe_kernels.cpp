// Mixture-of-experts routing, dispatch and combine (kernels/cpu/moe.hpp): the scores, the top-k with
// ties to the lower expert, the grouping by expert in token order, the weighted sum, and every
// backward against finite differences.
#include "kernel_test_util.hpp"
#include "kernels/cpu/moe.hpp"

using namespace kernel_test;

namespace {

struct Routed {
  Vec scores, weights;
  std::vector<int32_t> chosen, row_of, pos;
  std::vector<int64_t> counts, offsets;
};

Routed route(const Vec& logits, const MoeRouting& r) {
  Routed o;
  o.scores.resize(size_t(r.rows * r.experts));
  o.weights.resize(size_t(r.chosen()));
  o.chosen.resize(size_t(r.chosen()));
  o.row_of.resize(size_t(r.chosen()));
  o.pos.resize(size_t(r.chosen()));
  o.counts.resize(size_t(r.experts));
  o.offsets.resize(size_t(r.experts + 1));
  moe_route(logits.data(), o.scores.data(), o.chosen.data(), o.weights.data(), o.counts.data(), o.offsets.data(),
            o.row_of.data(), o.pos.data(), r);
  return o;
}

MoeRouting routing(int64_t rows, int64_t E, int64_t k, bool sigmoid, bool normalize) {
  MoeRouting r;
  r.rows = rows;
  r.experts = E;
  r.top_k = k;
  r.sigmoid = sigmoid;
  r.normalize = normalize;
  return r;
}

}  // namespace

TEST(MoeKernels, RouteChoosesTheBestWithTiesToTheLowerExpertAndGroupsInTokenOrder) {
  std::mt19937 g(81);
  for (bool sigmoid : {false, true}) {
    const MoeRouting r = routing(37, 6, 2, sigmoid, !sigmoid);
    Vec logits = randu(size_t(r.rows * r.experts), g, -2.0f, 2.0f);
    for (int64_t e = 0; e < r.experts; ++e) logits[size_t(3 * r.experts + e)] = 0.5f;  // token 3: all equal
    const Routed o = route(logits, r);
    EXPECT_EQ(o.chosen[6], 0);  // token 3's ties go to experts 0 and 1, in that order
    EXPECT_EQ(o.chosen[7], 1);
    for (int64_t t = 0; t < r.rows; ++t) {
      const float* s = o.scores.data() + t * r.experts;
      double sum = 0.0;
      for (int64_t e = 0; e < r.experts; ++e) {
        const double want = sigmoid ? 1.0 / (1.0 + std::exp(-double(logits[size_t(t * r.experts + e)]))) : 0.0;
        if (sigmoid) {
          EXPECT_NEAR(s[e], want, 1e-6);
        }
        sum += s[e];
      }
      if (!sigmoid) {
        EXPECT_NEAR(sum, 1.0, 1e-6);
      }
      const int32_t a = o.chosen[size_t(t * 2)], b = o.chosen[size_t(t * 2 + 1)];
      ASSERT_NE(a, b);
      for (int64_t e = 0; e < r.experts; ++e)  // nothing unchosen beats the second choice
        if (e != a && e != b) {
          EXPECT_LE(s[e], s[b]) << "token " << t;
        }
      EXPECT_GE(s[a], s[b]);
      const float wa = o.weights[size_t(t * 2)], wb = o.weights[size_t(t * 2 + 1)];
      if (!sigmoid) {
        EXPECT_NEAR(wa + wb, 1.0f, 1e-6);
      }
      if (sigmoid) {
        EXPECT_EQ(wa, s[a]);
      }
    }
    int64_t total = 0;
    for (int64_t e = 0; e < r.experts; ++e) {
      EXPECT_EQ(o.offsets[size_t(e)], total);
      total += o.counts[size_t(e)];
      for (int64_t p = o.offsets[size_t(e)] + 1; p < o.offsets[size_t(e + 1)]; ++p)
        EXPECT_LT(o.row_of[size_t(p - 1)], o.row_of[size_t(p)]) << "expert " << e << ": token order";
    }
    EXPECT_EQ(total, r.chosen());
    for (int64_t c = 0; c < r.chosen(); ++c) {
      const int32_t p = o.pos[size_t(c)];
      EXPECT_EQ(o.row_of[size_t(p)], c / r.top_k);
      EXPECT_GE(p, o.offsets[size_t(o.chosen[size_t(c)])]);
      EXPECT_LT(p, o.offsets[size_t(o.chosen[size_t(c)] + 1)]);
    }
  }
}

TEST(MoeKernels, GatherAndCombineMatchTheirDefinitionAndTheirBackwardsTheDifferences) {
  std::mt19937 g(82);
  const MoeRouting r = routing(9, 5, 3, false, true);
  const int64_t d = 7;
  const Routed o = route(randu(size_t(r.rows * r.experts), g), r);
  Vec x = randu(size_t(r.rows * d), g), grouped(size_t(r.chosen() * d));
  moe_gather(x.data(), o.row_of.data(), grouped.data(), r.chosen(), d);
  for (int64_t p = 0; p < r.chosen(); ++p)
    for (int64_t i = 0; i < d; ++i) ASSERT_EQ(grouped[size_t(p * d + i)], x[size_t(o.row_of[size_t(p)] * d + i)]);
  Vec w = o.weights, y(size_t(r.rows * d)), dy = randu(y.size(), g);
  auto loss = [&] {
    moe_combine(grouped.data(), o.pos.data(), w.data(), y.data(), r, d);
    double l = 0.0;
    for (size_t i = 0; i < y.size(); ++i) l += double(y[i]) * dy[i];
    return l;
  };
  Vec dgrouped(grouped.size()), dw(w.size());
  moe_combine_backward(dy.data(), grouped.data(), o.pos.data(), w.data(), dgrouped.data(), dw.data(), r, d);
  expect_grad(dgrouped, numeric_grad(grouped, loss, 1e-2f), 1e-3, "d grouped");
  expect_grad(dw, numeric_grad(w, loss, 1e-2f), 1e-3, "d weights");
  // the gather's backward is the unweighted combine: dx[t] = Σ_j dgrouped[pos[t, j]]
  Vec dx(x.size());
  moe_combine(dgrouped.data(), o.pos.data(), nullptr, dx.data(), r, d);
  auto through_gather = [&] {
    moe_gather(x.data(), o.row_of.data(), grouped.data(), r.chosen(), d);
    double l = 0.0;
    for (size_t i = 0; i < grouped.size(); ++i) l += double(grouped[i]) * dgrouped[i];
    return l;
  };
  expect_grad(dx, numeric_grad(x, through_gather, 1e-2f), 1e-4, "d x through the gather");
}

// L = Σ a·weights + Σ b·scores: the router's backward against central differences of the logits
// (the chosen experts stay the same under the small steps).
TEST(MoeKernels, RouteBackwardMatchesDifferences) {
  std::mt19937 g(83);
  for (bool sigmoid : {false, true})
    for (bool normalize : {false, true}) {
      SCOPED_TRACE(std::string(sigmoid ? "sigmoid" : "softmax") + (normalize ? ", renormalised" : ""));
      const MoeRouting r = routing(11, 6, 2, sigmoid, normalize);
      Vec logits = randu(size_t(r.rows * r.experts), g, -2.0f, 2.0f);
      const Routed base = route(logits, r);
      const Vec a = randu(size_t(r.chosen()), g), b = randu(size_t(r.rows * r.experts), g);
      auto loss = [&] {
        const Routed o = route(logits, r);
        EXPECT_EQ(o.chosen, base.chosen);
        double l = 0.0;
        for (size_t i = 0; i < a.size(); ++i) l += double(a[i]) * o.weights[i];
        for (size_t i = 0; i < b.size(); ++i) l += double(b[i]) * o.scores[i];
        return l;
      };
      Vec dlogits(logits.size());
      moe_route_backward(base.scores.data(), base.chosen.data(), a.data(), b.data(), dlogits.data(), r);
      expect_grad(dlogits, numeric_grad(logits, loss, 1e-3f), 2e-3, "d logits");
    }
}

// A capacity keeps, of each sample, an expert's first `capacity` copies in token then choice order:
// the rest get pos -1, are neither grouped nor counted, and add nothing to the combine or its backward.
TEST(MoeKernels, CapacityDropsAnExpertsLaterCopiesPerSample) {
  std::mt19937 g(83);
  MoeRouting r = routing(12, 3, 2, false, true);
  r.sample_rows = 4;  // three samples
  r.capacity = 2;
  const Vec logits = randu(size_t(r.rows * r.experts), g, -2.0f, 2.0f);
  const Routed o = route(logits, r);
  int64_t kept = 0;
  for (int64_t s = 0; s < 3; ++s) {
    std::vector<int64_t> seen(3, 0);
    for (int64_t c = s * 8; c < (s + 1) * 8; ++c) {
      const bool keep = seen[size_t(o.chosen[size_t(c)])]++ < 2;
      EXPECT_EQ(o.pos[size_t(c)] >= 0, keep) << "copy " << c;
      if (keep) {
        EXPECT_EQ(o.row_of[size_t(o.pos[size_t(c)])], int32_t(c / 2));
      }
      kept += keep;
    }
  }
  EXPECT_LT(kept, r.chosen());  // something was dropped
  EXPECT_EQ(o.offsets[3], kept);
  const int64_t d = 5;
  const Vec grouped = randu(size_t(kept * d), g, -1.0f, 1.0f), dy = randu(size_t(r.rows * d), g, -1.0f, 1.0f);
  Vec y(size_t(r.rows * d)), dgrouped(size_t(kept * d)), dweights(size_t(r.chosen()), 7.0f);
  moe_combine(grouped.data(), o.pos.data(), o.weights.data(), y.data(), r, d);
  moe_combine_backward(dy.data(), grouped.data(), o.pos.data(), o.weights.data(), dgrouped.data(), dweights.data(), r, d);
  for (int64_t t = 0; t < r.rows; ++t)
    for (int64_t i = 0; i < d; ++i) {
      double want = 0.0;
      for (int64_t j = 0; j < 2; ++j) {
        const int32_t p = o.pos[size_t(t * 2 + j)];
        if (p >= 0) want += double(o.weights[size_t(t * 2 + j)]) * grouped[size_t(p * d + i)];
      }
      EXPECT_NEAR(y[size_t(t * d + i)], want, 1e-6);
    }
  for (int64_t c = 0; c < r.chosen(); ++c)
    if (o.pos[size_t(c)] < 0) {
      EXPECT_EQ(dweights[size_t(c)], 0.0f);
    }
}
