// MoeLayer (see moe_layer.hpp).
#include "nn/moe_layer.hpp"

#include <cstring>

#include "core/error.hpp"

namespace dtrain {

MoeLayer::MoeLayer(ComputeDevice& dev, Unit& u, const std::string& prefix, const MoeSpec& spec)
    : dev_(&dev), spec_(spec) {
  const int64_t d = spec.dim, f = spec.expert_ff;
  router_ = u.add(prefix + "gate.weight", {spec.experts, d}, Init::xavier);
  for (int64_t e = 0; e < spec.experts; ++e) {
    const std::string p = prefix + "experts." + std::to_string(e) + ".";
    gate_up_.push_back(u.add(p + "gate_proj.weight", {f, d}, Init::xavier));
    const ParamRef up = u.add(p + "up_proj.weight", {f, d}, Init::xavier);  // read through gate_up_[e]
    DT_ASSERT(up.info().offset == gate_up_.back().info().offset + f * d && "expert_ff · dim must be a multiple of 16");
    down_.push_back(u.add(p + "down_proj.weight", {d, f}, Init::xavier));
  }
}

MoeRouting MoeLayer::routing(int64_t rows) const {
  MoeRouting r;
  r.rows = rows;
  r.experts = spec_.experts;
  r.top_k = spec_.top_k;
  r.sigmoid = spec_.sigmoid;
  r.normalize = spec_.normalize;
  return r;
}

void MoeLayer::plan(Arena& arena, int64_t rows, int slots) {
  const int64_t d = spec_.dim, f = spec_.expert_ff, E = spec_.experts, n = rows * spec_.top_k;
  saved_.assign(size_t(slots), Saved{});
  for (Saved& s : saved_) {
    s.scores = arena.f32(rows * E);
    s.weights = arena.f32(n);
    s.grouped = arena.f32(n * d);
    s.hidden = arena.f32(n * 2 * f);
    s.act = arena.f32(n * f);
    s.out = arena.f32(n * d);
    s.chosen = static_cast<int32_t*>(arena.alloc(n, DType::i32));
    s.row_of = static_cast<int32_t*>(arena.alloc(n, DType::i32));
    s.pos = static_cast<int32_t*>(arena.alloc(n, DType::i32));
    s.counts.assign(size_t(E), 0);
    s.offsets.assign(size_t(E + 1), 0);
  }
}

// dgrouped [n, d], dweights [n], dact [n, f], dhidden [n, 2f], dscores and dlogits [rows, E], each
// 16-float aligned.
int64_t MoeLayer::scratch_floats(int64_t rows) const {
  const int64_t d = spec_.dim, f = spec_.expert_ff, E = spec_.experts, n = rows * spec_.top_k;
  auto a = [](int64_t x) { return (x + 15) / 16 * 16; };
  return a(n * d) + a(n) + a(n * f) + a(n * 2 * f) + 2 * a(rows * E);
}

template <class F>
void MoeLayer::each_expert(const Saved& s, F&& f) const {
  for (int64_t e = 0; e < spec_.experts; ++e)
    if (s.counts[size_t(e)] > 0) f(e, s.offsets[size_t(e)], s.counts[size_t(e)]);
}

void MoeLayer::forward(const float* x, float* y, int64_t rows, int slot, Precision p) {
  Saved& s = saved_[size_t(slot)];
  const int64_t d = spec_.dim, f = spec_.expert_ff, E = spec_.experts;
  const MoeRouting r = routing(rows);
  float* logits = s.out;  // [rows, E] fits in out [rows·k, d]: spent before the experts write it
  DT_ASSERT(E <= spec_.top_k * d);
  dev_->matmul(x, router_.data(), logits, linear_forward_args(rows, d, E, nullptr, p));
  dev_->moe_route(logits, s.scores, s.chosen, s.weights, s.counts.data(), s.offsets.data(), s.row_of, s.pos, r);
  dev_->moe_gather(x, s.row_of, s.grouped, r.chosen(), d);
  each_expert(s, [&](int64_t e, int64_t at, int64_t n) {
    float* h = s.hidden + at * 2 * f;
    float* a = s.act + at * f;
    dev_->matmul(s.grouped + at * d, gate_up_[size_t(e)].data(), h, linear_forward_args(n, d, 2 * f, nullptr, p));
    dev_->swiglu_forward(h, a, n, f);
    dev_->matmul(a, down_[size_t(e)].data(), s.out + at * d, linear_forward_args(n, f, d, nullptr, p));
  });
  dev_->moe_combine(s.out, s.pos, s.weights, y, r, d);
}

void MoeLayer::backward(const float* x, const float* dy, float* dx, int64_t rows, int64_t T, float aux_scale,
                        int slot, float* scratch, Precision p) {
  const Saved& s = saved_[size_t(slot)];
  const int64_t d = spec_.dim, f = spec_.expert_ff, E = spec_.experts, n = rows * spec_.top_k;
  const MoeRouting r = routing(rows);
  auto a = [](int64_t v) { return (v + 15) / 16 * 16; };
  float *dgrouped = scratch, *dweights = dgrouped + a(n * d), *dact = dweights + a(n), *dhidden = dact + a(n * f);
  float *dscores = dhidden + a(n * 2 * f), *dlogits = dscores + a(rows * E);
  dev_->moe_combine_backward(dy, s.out, s.pos, s.weights, dgrouped, dweights, r, d);
  each_expert(s, [&](int64_t e, int64_t at, int64_t m) {
    const float *h = s.hidden + at * 2 * f, *act = s.act + at * f, *xg = s.grouped + at * d;
    float *g = dgrouped + at * d, *da = dact + at * f, *dh = dhidden + at * 2 * f;
    dev_->matmul(g, down_[size_t(e)].data(), da, linear_backward_input_args(m, f, d, false, p));
    dev_->matmul(g, act, down_[size_t(e)].grad(), linear_backward_weight_args(m, f, d, p));
    dev_->swiglu_backward(h, da, dh, m, f);
    dev_->matmul(dh, xg, gate_up_[size_t(e)].grad(), linear_backward_weight_args(m, d, 2 * f, p));
    dev_->matmul(dh, gate_up_[size_t(e)].data(), g, linear_backward_input_args(m, d, 2 * f, false, p));  // dgrouped = d x rows
  });
  dev_->moe_combine(dgrouped, s.pos, nullptr, dx, r, d);  // the gather's backward
  balance_grad(s, rows, T, aux_scale, dscores);
  dev_->moe_route_backward(s.scores, s.chosen, dweights, dscores, dlogits, r);
  dev_->matmul(dlogits, x, router_.grad(), linear_backward_weight_args(rows, d, E, p));
  dev_->matmul(dlogits, router_.data(), dx, linear_backward_input_args(rows, d, E, true, p));
}

// d(balance loss)/d scores for samples of T rows: with P_e the mean normalised score and c_e the
// sample's tokens routed to e, loss = E / (k·T) · Σ_e c_e · P_e; counts are not differentiated.
// (Host loops over the scores: the CPU's memory.)
void MoeLayer::balance_grad(const Saved& s, int64_t rows, int64_t T, float scale, float* dscores) const {
  const int64_t E = spec_.experts, k = spec_.top_k;
  std::vector<double> g(static_cast<size_t>(E));
  for (int64_t s0 = 0; s0 < rows; s0 += T) {
    std::fill(g.begin(), g.end(), 0.0);
    for (int64_t c = s0 * k; c < (s0 + T) * k; ++c) g[size_t(s.chosen[c])] += 1.0;
    for (double& v : g) v *= double(scale) * double(E) / (double(k) * double(T) * double(T));
    for (int64_t t = s0; t < s0 + T; ++t) {
      const float* sc = s.scores + t * E;
      float* ds = dscores + t * E;
      if (!spec_.sigmoid) {
        for (int64_t e = 0; e < E; ++e) ds[e] = float(g[size_t(e)]);
        continue;
      }
      double sum = 0.0, inner = 0.0;  // through the normalisation n_e = s_e / Σ s
      for (int64_t e = 0; e < E; ++e) sum += sc[e];
      for (int64_t e = 0; e < E; ++e) inner += g[size_t(e)] * sc[e] / sum;
      for (int64_t e = 0; e < E; ++e) ds[e] = float((g[size_t(e)] - inner) / sum);
    }
  }
}

double MoeLayer::balance_loss_sum(int64_t T, int slot) const {
  const Saved& s = saved_[size_t(slot)];
  const int64_t E = spec_.experts, k = spec_.top_k;
  DT_ASSERT(T > 0);
  double total = 0.0;
  // rows of the pass: the chosen experts span rows·k entries; the samples are its T-row runs
  const int64_t rows = s.offsets[size_t(E)] / k;
  std::vector<double> count(static_cast<size_t>(E)), mean(static_cast<size_t>(E));
  for (int64_t s0 = 0; s0 < rows; s0 += T) {
    std::fill(count.begin(), count.end(), 0.0);
    std::fill(mean.begin(), mean.end(), 0.0);
    for (int64_t c = s0 * k; c < (s0 + T) * k; ++c) count[size_t(s.chosen[c])] += 1.0;
    for (int64_t t = s0; t < s0 + T; ++t) {
      const float* sc = s.scores + t * E;
      double sum = 0.0;
      for (int64_t e = 0; e < E; ++e) sum += sc[e];
      for (int64_t e = 0; e < E; ++e) mean[size_t(e)] += (spec_.sigmoid ? sc[e] / sum : sc[e]) / double(T);
    }
    double l = 0.0;
    for (int64_t e = 0; e < E; ++e) l += count[size_t(e)] * mean[size_t(e)];
    total += l * double(E) / (double(k) * double(T));
  }
  return total;
}

double MoeLayer::train_flops_per_token() const {
  const double d = double(spec_.dim), f = double(spec_.expert_ff);
  return 6.0 * (d * double(spec_.experts) + double(spec_.top_k) * 3.0 * d * f);
}

}  // namespace dtrain
