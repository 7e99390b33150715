// ClassifierHead (see head.hpp).
#include "nn/classifier_head.hpp"

#include <algorithm>

namespace dtrain {

namespace {
int64_t aligned(int64_t floats) { return (floats + 15) / 16 * 16; }  // 64 bytes, as the arena hands out
}  // namespace

ClassifierHead::ClassifierHead(ComputeDevice& dev, const EmbedHeadShape& c, const ParamRef* tied, TpSlice slice, TpRegions& regions)
    : Module("head"), dev_(dev), c_(c), slice_(slice), regions_(regions) {
  DT_ASSERT(c.tied == (tied != nullptr));
  const TpSplit vocab{0, 1};
  Unit& u = unit();
  if (has_norm())
    norm_f_ = Norm(dev, u, c.norm, c.dim, c.norm_eps,
                   c.final_norm == EmbedHeadShape::FinalNorm::rms ? NormKind::rms : NormKind::layer, slice.splits_rows());
  if (!c.tied) w_ = u.add(c.head + ".weight", {c.vocab_size, c.dim}, c.head_init, c.dim, vocab, slice);
  if (c.head_bias) b_ = u.add(c.head + ".bias", {c.vocab_size}, Init::fan_in_uniform, c.dim, vocab, slice);
  if (tied) {
    tied_ = *tied;
    u.add_read(tied->unit);
  }
  (tied ? *tied->unit : u).set_read_by_products();
}

void ClassifierHead::plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) {
  const int slots = keep.slots;
  const int64_t R = largest.rows(), d = c_.dim;
  if (has_norm()) norm_f_.plan(arena, slice_.local_rows(R), slots);
  hf_ = arena.f32(R * d);
  dhf_.clear();
  for (int slot = 0; slot < slots; ++slot) dhf_.push_back(arena.f32(R * d));
}

int64_t ClassifierHead::scratch_floats(const StepContext& ctx) const {
  return slice_.count > 1 ? 2 * aligned(ctx.rows() * c_.dim) : 0;  // gathered rows; partial input gradients
}

double ClassifierHead::train_flops_per_sample() const {
  return double(c_.seq_len) * 6.0 * double(c_.vocab_size) * double(c_.dim);  // the classifier, forward and both gradients
}

VocabRange ClassifierHead::vocab_range() const {
  const int64_t n = (tied_.unit ? tied_ : w_).info().shape[0];
  return {slice_.index * n, n};
}

const float* ClassifierHead::normed(const float* x, const UnitPass& p) {
  if (!has_norm()) return x;
  norm_f_.forward(x, hf_, slice_.local_rows(p.ctx.rows()), p.slot);
  return hf_;
}

ClassifierArgs ClassifierHead::classifier_args(const float* h, const UnitPass& p) const {
  const int64_t rows = p.ctx.rows();
  const VocabRange v = vocab_range();
  float* gathered = slice_.count > 1 ? p.scratch + aligned(rows * c_.dim) : nullptr;
  const float* bias = c_.head_bias ? b_.data() : nullptr;
  ClassifierArgs a{regions_.all_rows(h, gathered, rows, c_.dim), weight(p.ctx.precision), bias, p.targets, rows,
                   c_.dim, v.count, p.ctx.precision};
  a.vocab_begin = v.begin;
  a.words = std::clamp<int64_t>(c_.vocab_size - v.begin, 0, v.count);  // a padded last slice holds fewer
  a.combine = slice_.count > 1 ? &regions_ : nullptr;
  return a;
}

void ClassifierHead::forward(const float* x, const UnitPass& p) {
  const int64_t rows = p.ctx.rows(), d = c_.dim;
  ClassifierArgs a = classifier_args(normed(x, p), p);
  if (p.backward) {
    float* dh = dhf_[size_t(p.slot)];
    a.grad_scale = p.ctx.loss_scale;
    a.dx = slice_.splits_rows() ? p.scratch : dh;  // each vocabulary slice's part, summed below
    a.dW = weight_grad();
    a.dbias = c_.head_bias ? b_.grad() : nullptr;
    dev_.classifier_loss(a, nullptr, p.loss_sum);
    regions_.sum_partials(a.dx, dh, rows, d);
  } else {
    const bool staged = p.per_row && p.per_row_device;  // the device writes the row losses first
    a.correct = p.metric_sum;
    dev_.classifier_loss(a, staged ? p.per_row_device : p.per_row, p.loss_sum);
    if (staged) dev_.download(p.per_row, p.per_row_device, sizeof(float) * size_t(rows));
  }
}

void ClassifierHead::backward(const float* x, float*, float* dx, const UnitPass& p, BackwardPart part) {
  if (part == BackwardPart::weight) return;  // its gradients came in forward and the input half
  const int64_t n = slice_.local_rows(p.ctx.rows());
  if (has_norm())
    norm_f_.backward(x, dhf_[size_t(p.slot)], dx, n, false, p.slot);
  else
    dev_.copy(dx, dhf_[size_t(p.slot)], sizeof(float) * size_t(n * c_.dim));
}

void ClassifierHead::predict(const float* x, const UnitPass& p, float* out) {
  const int64_t rows = p.ctx.rows();
  float* gathered = slice_.count > 1 ? p.scratch : nullptr;
  const float* h = regions_.all_rows(normed(x, p), gathered, rows, c_.dim);
  const int64_t V = vocab_range().count;  // this slice's share of each row's logits
  const size_t bytes = sizeof(float) * size_t(rows * V);
  Buffer on_device, slice;  // generation and checks only: not in the step loop
  if (!dev_.host_accessible()) on_device = Buffer(dev_, bytes);
  if (slice_.count > 1) slice = Buffer(host_memory(), bytes);
  float* y = on_device.data() ? on_device.f32() : slice.data() ? slice.f32() : out;
  const float* bias = c_.head_bias ? b_.data() : nullptr;
  dev_.matmul(h, weight(p.ctx.precision), y, linear_forward_args(rows, c_.dim, V, bias, p.ctx.precision));
  if (on_device.data()) dev_.download(slice.data() ? slice.f32() : out, y, bytes);
  if (slice.data()) regions_.all_columns(slice.f32(), out, rows, V, c_.vocab_size);
}

}  // namespace dtrain
