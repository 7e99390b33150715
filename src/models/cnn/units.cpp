// ConvUnit and DenseUnit (see units.hpp).
#include "models/cnn/units.hpp"

#include <string>

namespace dtrain {

namespace {
constexpr uint32_t kDropSite = 0;  // each unit has one dropout: (unit, site 0) keys its mask

// The unit's own rate over the step's spec (whose rate only says dropout is on in this pass).
DropoutSpec with_rate(DropoutSpec s, float rate) {
  if (s.active()) s.p = rate;
  return s;
}

// The gradient through dropout after a ReLU, from out = ReLU'd values · mask · scale: dy · scale where
// out > 0, else 0 (dropped, or the value was 0 and ReLU's gradient is 0 there anyway), in place. No
// mask is drawn.
void relu_dropout_backward(ComputeDevice& dev, const float* out, float* dy, int64_t n, const DropoutSpec& d) {
  dev.relu_backward_from_output(out, dy, dy, n, d.active() ? d.scale() : 1.0f);
}
}  // namespace

ConvUnit::ConvUnit(ComputeDevice& dev, const CnnConfig& c, int i)
    : Module("conv" + std::to_string(i + 1)), dev_(dev), id_(uint32_t(i)), dropout_(c.conv_dropout), act_(c.act()) {
  const CnnConfig::Shapes s = c.shapes();
  const ConvShape& cs = s.convs[size_t(i)];
  conv_ = Conv2d(dev, unit(), "conv" + std::to_string(i + 1), cs.C, cs.K, cs.R, cs.H, cs.W, cs.pad);
  const bool last = size_t(i) + 1 == s.convs.size();
  pooled_ = s.pooled && last;
  if (pooled_) pool_ = MaxPool2d(dev, s.pool.C, s.pool.H, s.pool.W, s.pool.kernel);
  if (!last) dropout_ = 0.0f;  // dropout follows the last convolution (and its pooling) only
  // From the first convolution's output through pooling the activations stay in the device's layout
  // (the next convolution and pooling read it as it is); the pixels, and what pooling (or a last
  // convolution without it) passes on, are NCHW. ReLU runs inside the convolution.
  if (!input_unit()) conv_.shape.x_layout = ImageLayout::device;
  if (!last || pooled_) conv_.shape.y_layout = ImageLayout::device;
  pool_.shape.x_layout = ImageLayout::device;
  conv_.shape.relu = act_ == Activation::relu;
  if (input_unit()) unit().set_backward_reads_params(false);  // no input gradient: only dW, from x and dy
}

void ConvUnit::plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) {
  const int64_t B = largest.B;
  if (pooled_) pool_.plan(arena, B, keep.slots);
  saved_.assign(size_t(keep.slots), Saved{});
  for (Saved& v : saved_) {
    v.y = arena.f32(B * conv_.out_floats());
    v.a = act_ == Activation::relu ? v.y : arena.f32(B * conv_.out_floats());
    v.pooled = pooled_ ? arena.f32(B * pool_.out_floats()) : nullptr;
    v.out = dropout_ > 0.0f ? arena.f32(B * out_floats()) : before_dropout(v);
  }
}

// W needs this unit's input (always copied) and its convolution's output gradient (the input unit's
// weight half reads dy, which the model keeps for it, and the pixels)
int64_t ConvUnit::weight_grad_floats(const StepContext& ctx, bool) const {
  return input_unit() ? 0 : ctx.B * (conv_.in_floats() + conv_.out_floats());
}

int64_t ConvUnit::scratch_floats(const StepContext& ctx) const {
  return pooled_ ? ctx.B * conv_.out_floats() : 0;  // the gradient of the convolution's output
}

double ConvUnit::train_flops_per_sample() const {
  // forward, the weight gradient and (not for the input unit) the input gradient: 2 FLOPs a MAC each
  return 2.0 * conv_.batch(1).macs() * (input_unit() ? 2.0 : 3.0);
}

DropoutSpec ConvUnit::drop(const StepContext& ctx) const { return with_rate(ctx.drop(id_, kDropSite), dropout_); }

void ConvUnit::forward(const float* x, const UnitPass& p) {
  const StepContext& ctx = p.ctx;
  const Saved& s = saved_[size_t(p.slot)];
  const float* in = input_unit() ? static_cast<const float*>(p.inputs) : x;
  conv_.forward(in, s.a, ctx.B, ctx.precision);
  if (!conv_.shape.relu) dev_.activation_forward(act_, s.a, s.y, ctx.B * conv_.out_floats());
  if (pooled_) pool_.forward(s.y, s.pooled, ctx.B, p.slot);
  if (s.out != before_dropout(s)) dev_.dropout_forward(before_dropout(s), s.out, ctx.B, out_floats(), drop(ctx));
}

void ConvUnit::backward(const float* x, float* dy, float* dx, const UnitPass& p, BackwardPart part) {
  const StepContext& ctx = p.ctx;
  Saved& s = saved_[size_t(p.slot)];
  // the input unit has no input gradient: all of its backward is the weight half
  if (input_unit() && part == BackwardPart::input) return;
  if (!input_unit() && part == BackwardPart::weight) {
    p.weight_grads->run();
    return;
  }
  DT_ASSERT(!p.weight_grads || p.weight_grads->empty());  // a split backward's W ran before this slot was reused
  const int64_t B = ctx.B, n = B * conv_.out_floats();
  if (s.out != before_dropout(s)) {
    // ReLU (pooling keeps its outputs' signs): ReLU's backward below zeroes what out > 0 does not keep
    const DropoutSpec d = drop(ctx);
    if (act_ == Activation::relu)
      relu_dropout_backward(dev_, s.out, dy, B * out_floats(), d);
    else
      dev_.dropout_backward(dy, dy, B, out_floats(), d);
  }
  float* dconv = dy;  // the gradient of the convolution's output, the activation's and pooling's undone
  if (pooled_) {
    dconv = p.scratch;
    pool_.backward(s.y, s.pooled, dy, dconv, B, p.slot);
  }
  if (act_ == Activation::relu)
    dev_.relu_backward_from_output(s.y, dconv, dconv, n, 1.0f);
  else
    dev_.activation_backward(act_, s.a, dconv, dconv, n);
  const float* in = input_unit() ? static_cast<const float*>(p.inputs) : x;
  if (!input_unit()) conv_.backward_input(dconv, dx, B, ctx.precision);
  if (part == BackwardPart::input)
    p.weight_grads->add(conv_, in, false, dconv, B, ctx.precision);
  else
    conv_.backward_weight(in, dconv, B, ctx.precision);
}

DenseUnit::DenseUnit(ComputeDevice& dev, const CnnConfig& c, int j, uint32_t id, int64_t in, int64_t out)
    : Module("fc" + std::to_string(j + 1)), dev_(dev), id_(id), dropout_(c.dropout), act_(c.act()) {
  fc_ = Linear(dev, unit(), "fc" + std::to_string(j + 1), in, out, true, Init::fan_in_uniform, LinearCut::none, {},
               1, Init::fan_in_uniform);
}

void DenseUnit::plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) {
  const int64_t B = largest.B;
  saved_.assign(size_t(keep.slots), Saved{});
  for (Saved& v : saved_) {
    v.out = arena.f32(B * fc_.out);
    v.h = act_ == Activation::relu ? nullptr : arena.f32(B * fc_.out);
  }
}

DropoutSpec DenseUnit::drop(const StepContext& ctx) const { return with_rate(ctx.drop(id_, kDropSite), dropout_); }

void DenseUnit::forward(const float* x, const UnitPass& p) {
  const StepContext& ctx = p.ctx;
  const Saved& s = saved_[size_t(p.slot)];
  float* out = s.out;
  float* h = s.h ? s.h : out;
  const bool relu = act_ == Activation::relu;  // in the product's pass (h is out)
  fc_.forward(x, h, ctx.B, ctx.precision, relu);
  if (!relu) dev_.activation_forward(act_, h, out, ctx.B * fc_.out);
  dev_.dropout_forward(out, out, ctx.B, fc_.out, drop(ctx));
}

void DenseUnit::backward(const float* x, float* dy, float* dx, const UnitPass& p, BackwardPart part) {
  const StepContext& ctx = p.ctx;
  Saved& s = saved_[size_t(p.slot)];
  if (part == BackwardPart::weight) {
    p.weight_grads->run();
    return;
  }
  DT_ASSERT(!p.weight_grads || p.weight_grads->empty());
  // ReLU: out = ReLU(h) · mask · scale, so dh = dy · scale where out > 0: ReLU's and dropout's
  // gradient at once. GELU: dropout's, then GELU's from h.
  const DropoutSpec d = drop(ctx);
  if (act_ == Activation::relu) {
    relu_dropout_backward(dev_, s.out, dy, ctx.B * fc_.out, d);
  } else {
    dev_.dropout_backward(dy, dy, ctx.B, fc_.out, d);
    dev_.activation_backward(act_, s.h, dy, dy, ctx.B * fc_.out);
  }
  fc_.backward_input(dy, dx, ctx.B, false, ctx.precision);
  if (part == BackwardPart::input)
    p.weight_grads->add(fc_, x, false, dy, ctx.B, ctx.precision);
  else
    fc_.backward_weight(x, dy, ctx.B, ctx.precision);
}

}  // namespace dtrain
