// MoeLayer (see moe_layer.hpp).
#include "nn/moe_layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "nn/layers.hpp"

namespace dtrain {

MoeLayer::MoeLayer(ComputeDevice& dev, Unit& u, Unit& experts, const std::string& prefix, const MoeSpec& spec,
                   ExpertExchange* exchange, TpSlice slice, SequenceAttention* sequence)
    : dev_(&dev), spec_(spec), exchange_(exchange && exchange->ranks() > 1 ? exchange : nullptr), sequence_(sequence),
      ff_(spec.expert_ff / slice.count), slices_(slice.count) {
  DT_ASSERT(!slice.splits_rows() && ff_ * slice.count == spec.expert_ff);
  const int64_t d = spec.dim, f = spec.expert_ff, P = exchange_ ? exchange_->ranks() : 1;
  const TpSplit rows{0, 1}, columns{1, 1};  // gate and up: a slice of their rows; down: of its columns
  DT_ASSERT(spec.experts % P == 0);
  held_ = spec.experts / P;
  first_ = exchange_ ? exchange_->rank() * held_ : 0;
  router_ = u.add(prefix + "gate.weight", {spec.experts, d}, Init::xavier);
  u.set_read_by_products();
  experts.set_read_by_products();
  if (slice.count > 1) u.set_partial_grad(router_);  // each slice's share of the experts' widths reaches it
  const int64_t per_expert = 3 * d * f;  // gate_proj, up_proj, down_proj
  experts.skip(3 * first_, first_ * per_expert);
  for (int64_t e = first_; e < first_ + held_; ++e) {
    const std::string p = prefix + "experts." + std::to_string(e) + ".";
    gate_up_.push_back(experts.add(p + "gate_proj.weight", {f, d}, Init::xavier, 0, rows, slice));
    const ParamRef up = experts.add(p + "up_proj.weight", {f, d}, Init::xavier, 0, rows, slice);  // via gate_up_[e]
    DT_ASSERT(up.info().offset == gate_up_.back().info().offset + ff_ * d && "expert_ff · dim must be a multiple of 16");
    down_.push_back(experts.add(p + "down_proj.weight", {d, f}, Init::xavier, 0, columns, slice));
  }
  experts.skip(3 * (spec.experts - first_ - held_), (spec.experts - first_ - held_) * per_expert);
}

MoeRouting MoeLayer::routing(int64_t rows, int64_t T) const {
  MoeRouting r;
  r.rows = rows;
  r.experts = spec_.experts;
  r.top_k = spec_.top_k;
  r.sigmoid = spec_.sigmoid;
  r.normalize = spec_.normalize;
  r.sample_rows = T;
  if (spec_.capacity_factor > 0)
    r.capacity = int64_t(std::ceil(double(spec_.capacity_factor) * double(T * spec_.top_k) / double(spec_.experts)));
  return r;
}

// Of each of its rows, a rank sends the experts held on one rank at most min(k, held) copies (a row's
// k experts are distinct); the held experts get that from each of the P ranks at most.
int64_t MoeLayer::at_experts_rows(int64_t rows) const {
  if (!exchange_) return rows * spec_.top_k;
  return int64_t(exchange_->ranks()) * rows * std::min(spec_.top_k, held_);
}

void MoeLayer::plan(Arena& arena, int64_t rows, int slots, bool bf16_act) {
  const int64_t d = spec_.dim, f = ff_, E = spec_.experts, n = rows * spec_.top_k;
  const int64_t m = at_experts_rows(rows), P = exchange_ ? exchange_->ranks() : 1;
  saved_.assign(size_t(slots), Saved{});
  next_.assign(size_t(held_ + 1), 0);
  per_expert_.assign(size_t(E), 0.0);
  for (Saved& s : saved_) {
    s.scores = arena.f32(rows * E);
    s.weights = arena.f32(n);
    s.grouped = arena.f32(n * d);
    s.out = arena.f32(n * d);
    s.expert_x = exchange_ ? arena.f32(m * d) : s.grouped;
    s.hidden = ActBuffer::of(arena.alloc(m * 2 * f, bf16_act ? DType::bf16 : DType::f32), bf16_act);
    s.act = ActBuffer::of(arena.alloc(m * f, bf16_act ? DType::bf16 : DType::f32), bf16_act);
    s.chosen = static_cast<int32_t*>(arena.alloc(n, DType::i32));
    s.row_of = static_cast<int32_t*>(arena.alloc(n, DType::i32));
    s.pos = static_cast<int32_t*>(arena.alloc(n, DType::i32));
    s.counts.assign(size_t(E), 0);
    s.offsets.assign(size_t(E + 1), 0);
    s.from.assign(size_t(P * held_), 0);
    s.at_counts.assign(size_t(held_), 0);
    s.at_offsets.assign(size_t(held_ + 1), 0);
    s.send_rows.assign(size_t(P), 0);
    s.recv_rows.assign(size_t(P), 0);
  }
}

// Forward: stage and expert_y [m, d] (expert parallel only), and dhidden (gate and up staged when kept
// in bf16; it lies past expert_y). Backward: dgrouped [n, d], dweights [n],
// dexpert [m, d] (one process: dgrouped itself), dact [m, f], dhidden [m, 2f], dscores and dlogits
// [rows, E], and stage [m, d] (expert parallel). Each 16-float aligned; n = rows·k, m = at_experts_rows.
MoeLayer::Work MoeLayer::carve(float* scratch, int64_t rows) const {
  const int64_t d = spec_.dim, f = ff_, E = spec_.experts, n = rows * spec_.top_k;
  const int64_t m = at_experts_rows(rows), staged = exchange_ ? m * d : 0;
  auto a = [](int64_t x) { return (x + 15) / 16 * 16; };
  float* at = scratch;
  auto take = [&](int64_t floats) {
    float* p = at;
    if (at) at += a(floats);
    return p;
  };
  Work w;
  w.stage = take(staged);
  w.expert_y = take(staged);
  at = scratch ? scratch + a(staged) : nullptr;  // backward's stage is forward's; the rest after it
  w.dgrouped = take(n * d);
  w.dweights = take(n);
  w.dexpert = exchange_ ? take(m * d) : w.dgrouped;
  w.dact = take(m * f);
  w.dhidden = take(m * 2 * f);
  w.dscores = take(rows * E);
  w.dlogits = take(rows * E);
  return w;
}

int64_t MoeLayer::scratch_floats(int64_t rows) const {
  const int64_t d = spec_.dim, f = ff_, E = spec_.experts, n = rows * spec_.top_k;
  const int64_t m = at_experts_rows(rows), staged = exchange_ ? m * d : 0;
  auto a = [](int64_t x) { return (x + 15) / 16 * 16; };
  const int64_t forward = 2 * a(staged);
  const int64_t backward = a(staged) + a(n * d) + a(n) + a(staged) + a(m * f) + a(m * 2 * f) + 2 * a(rows * E);
  return std::max(forward, backward);
}

template <class F>
void MoeLayer::each_expert(const Saved& s, F&& f) const {
  for (int64_t e = 0; e < held_; ++e)
    if (s.at_counts[size_t(e)] > 0) f(e, s.at_offsets[size_t(e)], s.at_counts[size_t(e)]);
}

void MoeLayer::exchange_counts(Saved& s) {
  const int64_t P = exchange_ ? exchange_->ranks() : 1;
  if (exchange_) {
    exchange_->exchange_counts(s.counts.data(), s.from.data(), held_);
  } else {
    s.from = s.counts;
  }
  std::fill(s.at_counts.begin(), s.at_counts.end(), 0);
  for (int64_t j = 0; j < P; ++j) {
    s.send_rows[size_t(j)] = s.offsets[size_t((j + 1) * held_)] - s.offsets[size_t(j * held_)];
    s.recv_rows[size_t(j)] = 0;
    for (int64_t e = 0; e < held_; ++e) {
      s.recv_rows[size_t(j)] += s.from[size_t(j * held_ + e)];
      s.at_counts[size_t(e)] += s.from[size_t(j * held_ + e)];
    }
  }
  for (int64_t e = 0; e < held_; ++e) s.at_offsets[size_t(e + 1)] = s.at_offsets[size_t(e)] + s.at_counts[size_t(e)];
}

// The rows at the held experts in two orders: as an exchange delivers them (by the rank they come
// from, then by expert: "staged") and as the experts' products read them (by expert, then by rank).
// to_experts: `in` is staged and `out` by expert; otherwise the reverse. `at_offsets`: where each
// expert's rows start by expert (exchange_counts'); `next`: held + 1 host counts of scratch.
static void regroup(ComputeDevice& dev, const std::vector<int64_t>& from, const std::vector<int64_t>& at_offsets,
                    int64_t P, int64_t held, const float* in, float* out, int64_t width, bool to_experts,
                    std::vector<int64_t>& next) {
  std::copy(at_offsets.begin(), at_offsets.end(), next.begin());  // where each expert's next rows go
  int64_t staged = 0;
  for (int64_t j = 0; j < P; ++j)
    for (int64_t e = 0; e < held; ++e) {
      const int64_t rows = from[size_t(j * held + e)];
      const int64_t a = staged * width, b = next[size_t(e)] * width;
      if (rows > 0) dev.copy(out + (to_experts ? b : a), in + (to_experts ? a : b), sizeof(float) * size_t(rows * width));
      staged += rows;
      next[size_t(e)] += rows;
    }
}

void MoeLayer::dispatch(const Saved& s, const float* by_expert, float* stage, float* at_experts, int64_t width) {
  exchange_->exchange_rows(by_expert, s.send_rows, stage, s.recv_rows, width);
  regroup(*dev_, s.from, s.at_offsets, exchange_->ranks(), held_, stage, at_experts, width, true, next_);
}

void MoeLayer::combine_back(const Saved& s, const float* at_experts, float* stage, float* by_expert, int64_t width) {
  regroup(*dev_, s.from, s.at_offsets, exchange_->ranks(), held_, at_experts, stage, width, false, next_);
  exchange_->exchange_rows(stage, s.recv_rows, by_expert, s.send_rows, width);
}

void MoeLayer::forward(const float* x, float* y, int64_t rows, int64_t T, const SequenceShard& sequence, int slot,
                       float* scratch, Precision p) {
  Saved& s = saved_[size_t(slot)];
  const int64_t d = spec_.dim, f = ff_, E = spec_.experts;
  const MoeRouting r = routing(rows, T);
  s.rows = rows;
  s.T = T;
  s.T_whole = sequence.global_length(T);
  const Work w = carve(scratch, rows);
  float* logits = s.out;  // [rows, E] fits in out [rows·k, d]: spent before the experts write it
  DT_ASSERT(E <= spec_.top_k * d);
  dev_->matmul(x, weight_operand(*dev_, router_, x, p), logits, linear_forward_args(rows, d, E, nullptr, p));
  dev_->moe_route(logits, s.scores, s.chosen, s.weights, s.counts.data(), s.offsets.data(), s.row_of, s.pos, r);
  dev_->moe_gather(x, s.row_of, s.grouped, s.offsets[size_t(E)], d);  // the copies kept
  count_samples(s);
  exchange_counts(s);
  if (exchange_) dispatch(s, s.grouped, w.stage, s.expert_x, d);
  float* expert_y = exchange_ ? w.expert_y : s.out;
  each_expert(s, [&](int64_t e, int64_t at, int64_t n) {
    float *x_e = s.expert_x + at * d, *y_e = expert_y + at * d;
    const ActBuffer h = s.hidden.at(at * 2 * f), a = s.act.at(at * f);
    const Operand w_gu = weight_operand(*dev_, gate_up_[size_t(e)], x_e, p),
                  w_down = weight_operand(*dev_, down_[size_t(e)], a, p);
    write_activation(*dev_, h, w.dhidden, n * 2 * f, [&](float* out) {  // (dhidden: staging, when kept in bf16)
      moe_row_pieces(n, [&](int64_t r, int64_t m) {
        dev_->matmul(x_e + r * d, w_gu, out + r * 2 * f, linear_forward_args(m, d, 2 * f, nullptr, p));
      });
    });
    dev_->swiglu_forward(h, a, n, f);
    moe_row_pieces(n, [&](int64_t r, int64_t m) {
      dev_->matmul(Operand(a).at(r * f), w_down, y_e + r * d, linear_forward_args(m, f, d, nullptr, p));
    });
  });
  if (exchange_) combine_back(s, expert_y, w.stage, s.out, d);
  dev_->moe_combine(s.out, s.pos, s.weights, y, r, d);
}

void MoeLayer::backward(const float* x, const float* dy, float* dx, int64_t rows, float aux_scale, int slot,
                        float* scratch, Precision p, bool counted) {
  const Saved& s = saved_[size_t(slot)];
  const int64_t d = spec_.dim, f = ff_, E = spec_.experts;
  const MoeRouting r = routing(rows, s.T);
  const Work w = carve(scratch, rows);
  dev_->moe_combine_backward(dy, s.out, s.pos, s.weights, w.dgrouped, w.dweights, r, d);
  if (exchange_) dispatch(s, w.dgrouped, w.stage, w.dexpert, d);
  each_expert(s, [&](int64_t e, int64_t at, int64_t n) {
    const float* xg = s.expert_x + at * d;
    const Operand h = Operand(s.hidden).at(at * 2 * f), act = Operand(s.act).at(at * f);
    float *g = w.dexpert + at * d, *da = w.dact + at * f;
    // gate and up's gradient, which only products read: in bf16 where they are kept so
    const ActBuffer dh = ActBuffer::of(w.dhidden, s.hidden.bf16).at(at * 2 * f);
    const ParamRef &gu = gate_up_[size_t(e)], &down = down_[size_t(e)];
    moe_row_pieces(n, [&](int64_t r, int64_t m) {  // each product over every piece before the next product
      dev_->matmul(g + r * d, weight_operand(*dev_, down, g, p), da + r * f,
                   linear_backward_input_args(m, f, d, false, p));
    });
    moe_row_pieces(n, [&](int64_t r, int64_t m) {
      dev_->matmul(g + r * d, act.at(r * f), down.grad(), linear_backward_weight_args(m, f, d, p));
    });
    dev_->swiglu_backward(h, da, dh, n, f);
    moe_row_pieces(n, [&](int64_t r, int64_t m) {
      dev_->matmul(Operand(dh).at(r * 2 * f), xg + r * d, gu.grad(), linear_backward_weight_args(m, d, 2 * f, p));
    });
    moe_row_pieces(n, [&](int64_t r, int64_t m) {  // g = d x rows (g spent above)
      dev_->matmul(Operand(dh).at(r * 2 * f), weight_operand(*dev_, gu, dh, p), g + r * d,
                   linear_backward_input_args(m, d, 2 * f, false, p));
    });
  });
  if (exchange_) combine_back(s, w.dexpert, w.stage, w.dgrouped, d);
  dev_->moe_combine(w.dgrouped, s.pos, nullptr, dx, r, d);  // the gather's backward
  balance_grad(s, aux_scale / float(slices_), w.dscores);  // each slice adds its share
  if (counted) note_load(s, slot);
  dev_->moe_route_backward(s.scores, s.chosen, w.dweights, w.dscores, w.dlogits, r);
  dev_->matmul(w.dlogits, x, router_.grad(), linear_backward_weight_args(rows, d, E, p));
  dev_->matmul(w.dlogits, weight_operand(*dev_, router_, w.dlogits, p), dx,
               linear_backward_input_args(rows, d, E, true, p));
}

// Per sample (T rows of this pass, of a sequence of T_whole): its copies routed to each expert over the
// whole sequence (context parallel: summed over the sequence's shares).
void MoeLayer::count_samples(Saved& s) {
  const int64_t E = spec_.experts, k = spec_.top_k, B = s.rows / s.T;
  s.sample_counts.assign(size_t(B * E), 0.0f);
  for (int64_t c = 0; c < s.rows * k; ++c) s.sample_counts[size_t(c / (s.T * k) * E + s.chosen[c])] += 1.0f;
  if (sequence_ && s.T_whole != s.T) sequence_->sum_over_sequences(s.sample_counts.data(), B * E);
}

// d(balance loss)/d scores: with P_e the sequence's mean normalised score and c_e its copies routed to
// e, loss = E / (k·T) · Σ_e c_e · P_e per sample (T the whole sequence's length); counts are not
// differentiated. (Host loops over the scores: the CPU's memory.)
void MoeLayer::balance_grad(const Saved& s, float scale, float* dscores) const {
  const int64_t E = spec_.experts, k = spec_.top_k, T = s.T, Tw = s.T_whole;
  std::vector<double>& g = per_expert_;
  for (int64_t b = 0; b < s.rows / T; ++b) {
    for (int64_t e = 0; e < E; ++e)
      g[size_t(e)] = double(s.sample_counts[size_t(b * E + e)]) * double(scale) * double(E) /
                     (double(k) * double(Tw) * double(Tw));
    for (int64_t t = b * T; t < (b + 1) * T; ++t) {
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

// Summed over the pass's samples; under context parallel this share's part (its scores' share of each
// mean, with the whole sequence's counts), which the shares' sum makes whole.
double MoeLayer::balance_loss_sum(int slot) const {
  const Saved& s = saved_[size_t(slot)];
  const int64_t E = spec_.experts, k = spec_.top_k, T = s.T, Tw = s.T_whole;
  double total = 0.0;
  std::vector<double>& mean = per_expert_;
  for (int64_t b = 0; b < s.rows / T; ++b) {
    std::fill(mean.begin(), mean.end(), 0.0);
    for (int64_t t = b * T; t < (b + 1) * T; ++t) {
      const float* sc = s.scores + t * E;
      double sum = 0.0;
      for (int64_t e = 0; e < E; ++e) sum += sc[e];
      for (int64_t e = 0; e < E; ++e) mean[size_t(e)] += (spec_.sigmoid ? sc[e] / sum : sc[e]) / double(Tw);
    }
    double l = 0.0;
    for (int64_t e = 0; e < E; ++e) l += double(s.sample_counts[size_t(b * E + e)]) * mean[size_t(e)];
    total += l * double(E) / (double(k) * double(Tw));
  }
  return total;
}

void MoeLayer::note_load(const Saved& s, int slot) {
  routed_.resize(size_t(spec_.experts), 0.0);
  for (int64_t e = 0; e < spec_.experts; ++e) routed_[size_t(e)] += double(s.counts[size_t(e)]);
  balance_ += balance_loss_sum(slot);
  samples_ += double(s.rows / s.T) * double(s.T) / double(s.T_whole);  // (a share of each sample)
  dropped_ += double(s.rows * spec_.top_k - s.offsets[size_t(spec_.experts)]);
}

void MoeLayer::take_load(ExpertLoad& load, int64_t layer, int64_t layers, double weight) {
  load.size_for(layers, spec_.experts);
  routed_.resize(size_t(spec_.experts), 0.0);
  for (int64_t e = 0; e < spec_.experts; ++e) load.tokens[size_t(layer * spec_.experts + e)] += routed_[size_t(e)];
  load.balance_loss += weight * balance_;
  load.dropped[size_t(layer)] += dropped_;
  load.capacity = load.capacity || spec_.capacity_factor > 0;
  if (layer == 0) load.samples += samples_;
  std::fill(routed_.begin(), routed_.end(), 0.0);
  balance_ = samples_ = dropped_ = 0.0;
}

double MoeLayer::train_flops_per_token() const {
  const double d = double(spec_.dim), f = double(spec_.expert_ff);
  return 6.0 * (d * double(spec_.experts) + double(spec_.top_k) * 3.0 * d * f);
}

}  // namespace dtrain
