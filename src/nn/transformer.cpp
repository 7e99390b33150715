// TransformerLM (see transformer.hpp): unit construction, buffer planning, forward and backward.
#include "nn/transformer.hpp"

#include <algorithm>
#include <vector>

#include "kernels/cpu/embedding.hpp"

namespace dtrain {

TransformerLM::TransformerLM(const ModelConfig& c, int64_t max_batch, ComputeDevice& device, ParamStorage storage,
                             TpSlice slice, TpRegions& regions)
    : dev_(device), c_(c), slice_(slice), regions_(regions), max_batch_(max_batch), arena_(device) {
  c_.validate();
  c_.validate_tensor_parallel(slice.count, slice.sequence);
  const int64_t R = max_batch * c.seq_len, d = c.dim;
  const int64_t Rn = slice.local_rows(R);  // rows of the norms and residuals
  const TpSplit vocab{0, 1};  // embedding and classifier rows: the vocabulary
  wte_ = embed_unit_.add("embed.weight", {c.vocab_size, d}, Init::xavier, 0, vocab, slice);
  if (c.learned_positions) wpe_ = embed_unit_.add("pos.weight", {c.seq_len, d}, Init::xavier);
  embed_unit_.set_backward_reads_params(false);
  units_.push_back(&embed_unit_);
  for (int i = 0; i < c.layers; ++i) {
    blocks_.push_back(std::make_unique<Block>(dev_, c_, i, uint32_t(i + 1), arena_, R, slice_, regions_));
    units_.push_back(&blocks_.back()->unit());
  }
  if (c.final_norm) norm_f_ = LayerNorm(dev_, head_unit_, "norm_f", d, c.ln_eps, arena_, Rn, slice.splits_rows());
  if (!c.tied) head_w_ = head_unit_.add("head.weight", {c.vocab_size, d}, Init::xavier, 0, vocab, slice);
  if (c.head_bias) head_b_ = head_unit_.add("head.bias", {c.vocab_size}, Init::fan_in_uniform, d, vocab, slice);
  if (c.tied) head_unit_.add_read(&embed_unit_);
  units_.push_back(&head_unit_);

  int64_t total = 0;
  for (Unit* u : units_) {
    total += u->numel();
    for (const auto& p : u->params()) num_params_ += shape_numel(p.global_shape);
  }
  if (storage == ParamStorage::owned) {
    params_ = Buffer(dev_, sizeof(float) * total);
    grads_ = Buffer(dev_, sizeof(float) * total);
    int64_t off = 0;
    for (Unit* u : units_) {
      u->bind(params_.f32() + off, grads_.f32() + off);
      off += u->numel();
    }
  }

  pos_table_ = arena_.f32(c.seq_len * d);
  std::vector<float> table(size_t(c.seq_len * d));
  sinusoidal_table(table.data(), c.seq_len, d);
  dev_.upload(pos_table_, table.data(), sizeof(float) * table.size());
  h0_ = arena_.f32(R * d);
  hf_ = arena_.f32(R * d);
  dhf_ = arena_.f32(R * d);
  const int64_t dl = d / slice.count, ffl = c.ff_dim / slice.count;  // this slice's widths
  const bool cut = slice.count > 1;
  ws_ = Workspace{arena_.f32(R * d),          arena_.f32(R * d),          arena_.f32(R * d),
                  arena_.f32(R * d),          arena_.f32(R * 3 * dl),     arena_.f32(R * ffl),
                  arena_.f32(R * ffl),        cut ? arena_.f32(R * d) : nullptr,
                  cut ? arena_.f32(R * d) : nullptr};
  inputs_ = static_cast<int32_t*>(arena_.alloc(R, DType::i32));
  targets_ = static_cast<int32_t*>(arena_.alloc(R, DType::i32));
  per_row_ = arena_.f32(R);
  loss_sum_ = static_cast<double*>(arena_.alloc(2, DType::f32));
  dev_.synchronize();  // the position table's host copy goes out of scope
}

void TransformerLM::zero_grad() {
  DT_ASSERT(owns_params());
  dev_.zero(grads_.data(), grads_.size());
}

int64_t TransformerLM::offset_of(const Unit& u) const {
  int64_t off = 0;
  for (const Unit* v : units_) {
    if (v == &u) return off;
    off += v->numel();
  }
  DT_ASSERT(false);
  return -1;
}

float* TransformerLM::host_params() {
  DT_ASSERT(owns_params());
  if (dev_.host_accessible()) return params_.f32();
  if (!host_params_.data()) host_params_ = Buffer(host_memory(), params_.size());
  dev_.download(host_params_.data(), params_.data(), params_.size());
  return host_params_.f32();
}

void TransformerLM::upload_host_params() {
  if (dev_.host_accessible()) return;
  dev_.upload(params_.data(), host_params_.data(), params_.size());
  dev_.synchronize();
}

void TransformerLM::init_weights(uint64_t seed) {
  float* host = host_params();
  // fill the host array through the units, then point them back at the device buffers
  for (Unit* u : units_) u->bind(host + offset_of(*u), u->grad_data());
  init_parameters(units_, seed);
  for (Unit* u : units_) u->bind(params_.f32() + offset_of(*u), u->grad_data());
  upload_host_params();
}

const int32_t* TransformerLM::stage(const int32_t* host, int32_t* device_copy, int64_t n) {
  if (dev_.host_accessible()) return host;
  dev_.upload(device_copy, host, sizeof(int32_t) * size_t(n));
  return device_copy;
}

const float* TransformerLM::head_weight() const { return c_.tied ? wte_.data() : head_w_.data(); }
float* TransformerLM::head_weight_grad() const { return c_.tied ? wte_.grad() : head_w_.grad(); }

VocabRange TransformerLM::vocab_range() const {
  const int64_t n = wte_.info().shape[0];
  return {slice_.index * n, n};
}

ClassifierArgs TransformerLM::classifier_args(const float* h, const int32_t* targets, const StepContext& ctx) {
  const int64_t rows = ctx.rows();
  const VocabRange v = vocab_range();
  ClassifierArgs a{regions_.all_rows(h, ws_.full2, rows, c_.dim), head_weight(),
                   c_.head_bias ? head_b_.data() : nullptr, targets, rows, c_.dim, v.count, ctx.precision};
  a.vocab_begin = v.begin;
  a.words = std::clamp<int64_t>(c_.vocab_size - v.begin, 0, v.count);  // a padded last slice holds fewer
  a.combine = slice_.count > 1 ? &regions_ : nullptr;
  return a;
}

const float* TransformerLM::run_forward(const int32_t* inputs, const StepContext& ctx, UnitHooks* hooks) {
  DT_ASSERT(ctx.B <= max_batch_ && ctx.T <= c_.seq_len);
  const int64_t rows = ctx.rows(), d = c_.dim;
  const int64_t n = slice_.local_rows(rows);
  if (hooks) hooks->pre_forward(embed_unit_);
  // each vocabulary slice's rows of the table (positions added by slice 0), summed across slices
  float* part = slice_.splits_rows() ? ws_.full1 : h0_;
  const float* pos = slice_.index != 0 ? nullptr : c_.learned_positions ? wpe_.data() : pos_table_;
  dev_.embedding_forward(inputs, wte_.data(), pos, part, ctx.B, ctx.T, d, vocab_range());
  regions_.sum_partials(part, h0_, rows, d);
  dev_.dropout_forward(h0_, h0_, n, d, ctx.drop_rows(0, kDropEmbed, slice_.first_row(rows)));
  if (hooks) hooks->post_forward(embed_unit_);
  const float* h = h0_;
  for (auto& b : blocks_) {
    if (hooks) hooks->pre_forward(b->unit());
    b->forward(h, ctx, ws_);
    if (hooks) hooks->post_forward(b->unit());
    h = b->output();
  }
  if (hooks) hooks->pre_forward(head_unit_);  // the head owns the final norm
  if (c_.final_norm) {
    norm_f_.forward(h, hf_, n);
    h = hf_;
  }
  return h;  // the head's window is open: the caller runs the classifier, then post_forward
}

double TransformerLM::forward_backward(const int32_t* inputs, const int32_t* targets,
                                       const StepContext& ctx, UnitHooks* hooks) {
  queue_forward_backward(inputs, targets, ctx, hooks);
  return take_loss();
}

double TransformerLM::take_loss() {
  double loss = 0.0;
  dev_.download(&loss, loss_sum_, sizeof loss);
  dev_.zero(loss_sum_, sizeof(double));
  return loss;
}

void TransformerLM::queue_forward_backward(const int32_t* host_inputs, const int32_t* host_targets,
                                           const StepContext& ctx, UnitHooks* hooks) {
  const int64_t rows = ctx.rows(), d = c_.dim;
  const int32_t* inputs = stage(host_inputs, inputs_, rows);
  const int32_t* targets = stage(host_targets, targets_, rows);
  if (hooks) hooks->begin_pass(true);
  const int64_t n = slice_.local_rows(rows);
  const float* h = run_forward(inputs, ctx, hooks);
  ClassifierArgs a = classifier_args(h, targets, ctx);
  a.grad_scale = ctx.loss_scale;
  float* dh = c_.final_norm ? dhf_ : ws_.grad_a;  // the head input's gradient, this slice's rows
  a.dx = slice_.splits_rows() ? ws_.full1 : dh;        // each vocabulary slice's part, summed below
  a.dW = head_weight_grad();
  a.dbias = c_.head_bias ? head_b_.grad() : nullptr;
  dev_.classifier_loss(a, nullptr, loss_sum_);
  regions_.sum_partials(a.dx, dh, rows, d);
  if (hooks) hooks->post_forward(head_unit_);

  if (hooks) hooks->pre_backward(head_unit_);
  if (c_.final_norm) {
    const float* hin = blocks_.empty() ? h0_ : blocks_.back()->output();
    norm_f_.backward(hin, dhf_, ws_.grad_a, n, false);
  }
  if (hooks) hooks->post_backward(head_unit_);

  float* dout = ws_.grad_a;
  float* dx = ws_.grad_b;
  for (int64_t i = int64_t(blocks_.size()) - 1; i >= 0; --i) {
    Block& b = *blocks_[i];
    if (hooks) hooks->pre_backward(b.unit());
    const float* x = i == 0 ? h0_ : blocks_[i - 1]->output();
    b.backward(x, dout, dx, ctx, ws_);
    if (hooks) hooks->post_backward(b.unit());
    std::swap(dout, dx);
  }
  if (hooks) hooks->pre_backward(embed_unit_);
  dev_.dropout_backward(dout, dout, n, d, ctx.drop_rows(0, kDropEmbed, slice_.first_row(rows)));
  dev_.embedding_backward(inputs, regions_.all_rows(dout, ws_.full1, rows, d), wte_.grad(),
                          c_.learned_positions ? wpe_.grad() : nullptr, ctx.B, ctx.T, d, vocab_range());
  if (hooks) hooks->post_backward(embed_unit_);
  if (hooks) hooks->end_pass();
}

double TransformerLM::forward_loss(const int32_t* host_inputs, const int32_t* host_targets, const StepContext& ctx,
                                   float* per_row, UnitHooks* hooks) {
  StepContext eval = ctx;
  eval.training = false;
  const int64_t rows = ctx.rows();
  const int32_t* targets = stage(host_targets, targets_, rows);
  if (hooks) hooks->begin_pass(false);
  const float* h = run_forward(stage(host_inputs, inputs_, rows), eval, hooks);
  const ClassifierArgs a = classifier_args(h, targets, eval);
  const bool host = dev_.host_accessible();
  dev_.classifier_loss(a, per_row && !host ? per_row_ : per_row, loss_sum_);
  if (hooks) hooks->post_forward(head_unit_);
  if (hooks) hooks->end_pass();
  if (per_row && !host) dev_.download(per_row, per_row_, sizeof(float) * size_t(rows));
  return take_loss();
}

void TransformerLM::logits(const int32_t* host_inputs, const StepContext& ctx, float* out, UnitHooks* hooks) {
  StepContext eval = ctx;
  eval.training = false;
  const int64_t rows = ctx.rows();
  if (hooks) hooks->begin_pass(false);
  const float* h = regions_.all_rows(run_forward(stage(host_inputs, inputs_, rows), eval, hooks), ws_.full2, rows,
                                     c_.dim);
  const int64_t V = vocab_range().count;  // this slice's share of each row's logits
  const size_t bytes = sizeof(float) * size_t(rows * V);
  Buffer on_device, slice;  // generation and checks only: not in the step loop
  if (!dev_.host_accessible()) on_device = Buffer(dev_, bytes);
  if (slice_.count > 1) slice = Buffer(host_memory(), bytes);
  float* y = on_device.data() ? on_device.f32() : slice.data() ? slice.f32() : out;
  dev_.matmul(h, head_weight(), y,
              linear_forward_args(rows, c_.dim, V, c_.head_bias ? head_b_.data() : nullptr, ctx.precision));
  if (hooks) hooks->post_forward(head_unit_);
  if (hooks) hooks->end_pass();
  if (on_device.data()) dev_.download(slice.data() ? slice.f32() : out, y, bytes);
  if (slice.data()) regions_.all_columns(slice.f32(), out, rows, V, c_.vocab_size);
}

}  // namespace dtrain
