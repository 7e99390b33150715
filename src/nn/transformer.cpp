// TransformerLM (see transformer.hpp): unit construction, buffer planning, forward and backward.
#include "nn/transformer.hpp"

#include <algorithm>
#include <vector>

#include "kernels/cpu/embedding.hpp"

namespace dtrain {

TransformerLM::TransformerLM(const ModelConfig& c, int64_t max_batch, ComputeDevice& device, ParamStorage storage,
                             TpSlice slice, TpRegions& regions, StagePlan plan)
    : dev_(device), c_(c), slice_(slice), regions_(regions), plan_(std::move(plan)), max_batch_(max_batch),
      arena_(device) {
  c_.validate();
  c_.validate_tensor_parallel(slice.count, slice.sequence);
  const int L = int(c.layers), S = plan_.slots;
  if (plan_.stages.empty()) plan_.stages = {{0, L + 2}};
  DT_ASSERT(S >= 1);
  for (size_t k = 0; k < plan_.stages.size(); ++k) {
    const auto [first, last] = plan_.stages[k];
    DT_ASSERT(0 <= first && first < last && last <= L + 2 && (k == 0 || plan_.stages[k - 1].second <= first));
  }
  auto holds = [&](int unit) {
    for (auto [first, last] : plan_.stages)
      if (first <= unit && unit < last) return true;
    return false;
  };
  has_embed_ = holds(0);
  has_head_ = holds(L + 1);
  const int64_t R = max_batch * c.seq_len, d = c.dim;
  const int64_t Rn = slice.local_rows(R);  // rows of the norms and residuals
  const TpSplit vocab{0, 1};  // embedding and classifier rows: the vocabulary
  // every unit's model-wide first parameter index, whether built here or not (a block has 12)
  const uint32_t embed_params = c.learned_positions ? 2 : 1, block_params = 12;
  if (has_embed_) {
    wte_ = embed_unit_.add("embed.weight", {c.vocab_size, d}, Init::xavier, 0, vocab, slice);
    if (c.learned_positions) wpe_ = embed_unit_.add("pos.weight", {c.seq_len, d}, Init::xavier);
    embed_unit_.set_backward_reads_params(false);
    units_.push_back(&embed_unit_);
  }
  blocks_.resize(size_t(L));
  for (int i = 0; i < L; ++i) {
    if (!holds(i + 1)) continue;
    blocks_[i] = std::make_unique<Block>(dev_, c_, i, uint32_t(i + 1), arena_, R, slice_, regions_, S,
                                         plan_.split_backward);
    Unit& u = blocks_[i]->unit();
    DT_ASSERT(u.params().size() == block_params);
    u.set_first_index(embed_params + block_params * uint32_t(i));
    units_.push_back(&u);
  }
  if (has_head_) {
    if (c.final_norm) norm_f_ = LayerNorm(dev_, head_unit_, "norm_f", d, c.ln_eps, arena_, Rn, slice.splits_rows(), S);
    if (!c.tied) head_w_ = head_unit_.add("head.weight", {c.vocab_size, d}, Init::xavier, 0, vocab, slice);
    if (c.head_bias) head_b_ = head_unit_.add("head.bias", {c.vocab_size}, Init::fan_in_uniform, d, vocab, slice);
    DT_ASSERT(!c.tied || has_embed_);  // a tied head reads the embedding of its own stage (plans check it)
    if (c.tied) head_unit_.add_read(&embed_unit_);
    head_unit_.set_first_index(embed_params + block_params * uint32_t(L));
    units_.push_back(&head_unit_);
  }

  int64_t total = 0;
  for (Unit* u : units_) total += u->numel();
  num_params_ = c_.num_params();
  if (storage == ParamStorage::owned) {
    params_ = Buffer(dev_, sizeof(float) * total);
    grads_ = Buffer(dev_, sizeof(float) * total);
    int64_t off = 0;
    for (Unit* u : units_) {
      u->bind(params_.f32() + off, grads_.f32() + off);
      off += u->numel();
    }
  }

  for (auto [first, last] : plan_.stages) {
    Stage st;
    st.first = first;
    st.last = last;
    st.has_embed = first == 0;
    st.has_head = last == L + 2;
    for (int i = std::max(first, 1) - 1; i < std::min(last - 1, L); ++i) st.blocks.push_back(blocks_[i].get());
    for (int slot = 0; slot < S; ++slot) {
      if (!st.has_embed) st.in.push_back(arena_.f32(Rn * d));
      // the lowest unit's input gradient: the embedding's stage keeps it only for a split backward's W
      if (!st.has_embed || plan_.split_backward) st.gin.push_back(arena_.f32(Rn * d));
      if (!st.has_head) st.gout.push_back(arena_.f32(Rn * d));
    }
    stages_.push_back(std::move(st));
  }
  if (has_embed_) {
    pos_table_ = arena_.f32(c.seq_len * d);
    std::vector<float> table(size_t(c.seq_len * d));
    sinusoidal_table(table.data(), c.seq_len, d);
    dev_.upload(pos_table_, table.data(), sizeof(float) * table.size());
    for (int slot = 0; slot < S; ++slot) {
      h0_.push_back(arena_.f32(R * d));
      inputs_.push_back(static_cast<int32_t*>(arena_.alloc(R, DType::i32)));
      tokens_.push_back(nullptr);
    }
  }
  if (has_head_) {
    hf_ = arena_.f32(R * d);
    for (int slot = 0; slot < S; ++slot) dhf_.push_back(arena_.f32(R * d));
    targets_ = static_cast<int32_t*>(arena_.alloc(R, DType::i32));
    per_row_ = arena_.f32(R);
  }
  const int64_t dl = d / slice.count, ffl = c.ff_dim / slice.count;  // this slice's widths
  const bool cut = slice.count > 1;
  ws_ = Workspace{arena_.f32(R * d),          arena_.f32(R * d),          arena_.f32(R * d),
                  arena_.f32(R * d),          arena_.f32(R * 3 * dl),     arena_.f32(R * ffl),
                  arena_.f32(R * ffl),        cut ? arena_.f32(R * d) : nullptr,
                  cut ? arena_.f32(R * d) : nullptr};
  loss_sum_ = static_cast<double*>(arena_.alloc(2, DType::f32));
  dev_.zero(loss_sum_, sizeof(double));
  dev_.synchronize();  // the position table's host copy goes out of scope
}

bool TransformerLM::holds_whole_model() const {
  return stages_.size() == 1 && stages_[0].has_embed && stages_[0].has_head;
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
  const int64_t n = (has_embed_ ? wte_ : head_w_).info().shape[0];
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

const float* TransformerLM::stage_output(int k, int slot) const {
  const Stage& st = stages_[k];
  if (st.has_head) return nullptr;
  return st.blocks.empty() ? h0_[slot] : st.blocks.back()->output(slot);
}

const float* TransformerLM::unit_input(int k, int j, int slot) const {
  const Stage& st = stages_[k];
  if (j > 0) return st.blocks[j - 1]->output(slot);
  return st.has_embed ? h0_[slot] : st.in[slot];
}

const float* TransformerLM::forward_units(int k, int slot, const int32_t* host_inputs, const StepContext& ctx,
                                          UnitHooks* hooks) {
  DT_ASSERT(ctx.B <= max_batch_ && ctx.T <= c_.seq_len);
  const Stage& st = stages_[k];
  const int64_t rows = ctx.rows(), d = c_.dim;
  const int64_t n = slice_.local_rows(rows);
  if (st.has_embed) {
    const int32_t* inputs = tokens_[slot] = stage(host_inputs, inputs_[slot], rows);
    if (hooks) hooks->pre_forward(embed_unit_);
    // each vocabulary slice's rows of the table (positions added by slice 0), summed across slices
    float* part = slice_.splits_rows() ? ws_.full1 : h0_[slot];
    const float* pos = slice_.index != 0 ? nullptr : c_.learned_positions ? wpe_.data() : pos_table_;
    dev_.embedding_forward(inputs, wte_.data(), pos, part, ctx.B, ctx.T, d, vocab_range());
    regions_.sum_partials(part, h0_[slot], rows, d);
    dev_.dropout_forward(h0_[slot], h0_[slot], n, d, ctx.drop_rows(0, kDropEmbed, slice_.first_row(rows)));
    if (hooks) hooks->post_forward(embed_unit_);
  }
  for (size_t j = 0; j < st.blocks.size(); ++j) {
    Block& b = *st.blocks[j];
    if (hooks) hooks->pre_forward(b.unit());
    b.forward(unit_input(k, int(j), slot), ctx, ws_, slot);
    if (hooks) hooks->post_forward(b.unit());
  }
  if (!st.has_head) return nullptr;
  const float* h = unit_input(k, int(st.blocks.size()), slot);
  if (hooks) hooks->pre_forward(head_unit_);  // the head owns the final norm
  if (c_.final_norm) {
    norm_f_.forward(h, hf_, n, slot);
    h = hf_;
  }
  return h;
}

void TransformerLM::stage_forward(int k, int slot, const int32_t* inputs, const int32_t* host_targets,
                                  const StepContext& ctx, bool backward, UnitHooks* hooks, float* per_row) {
  const float* h = forward_units(k, slot, inputs, ctx, hooks);
  if (!h) return;
  const int64_t rows = ctx.rows(), d = c_.dim;
  ClassifierArgs a = classifier_args(h, stage(host_targets, targets_, rows), ctx);
  if (backward) {
    a.grad_scale = ctx.loss_scale;
    a.dx = slice_.splits_rows() ? ws_.full1 : dhf_[slot];  // each vocabulary slice's part, summed below
    a.dW = head_weight_grad();
    a.dbias = c_.head_bias ? head_b_.grad() : nullptr;
    dev_.classifier_loss(a, nullptr, loss_sum_);
    regions_.sum_partials(a.dx, dhf_[slot], rows, d);
  } else {
    const bool host = dev_.host_accessible();
    dev_.classifier_loss(a, per_row && !host ? per_row_ : per_row, loss_sum_);
    if (per_row && !host) dev_.download(per_row, per_row_, sizeof(float) * size_t(rows));
  }
  if (hooks) hooks->post_forward(head_unit_);
}

void TransformerLM::embedding_backward(float* g, int slot, const StepContext& ctx) {
  const int64_t rows = ctx.rows(), d = c_.dim, n = slice_.local_rows(rows);
  dev_.dropout_backward(g, g, n, d, ctx.drop_rows(0, kDropEmbed, slice_.first_row(rows)));
  dev_.embedding_backward(tokens_[slot], regions_.all_rows(g, ws_.full1, rows, d), wte_.grad(),
                          c_.learned_positions ? wpe_.grad() : nullptr, ctx.B, ctx.T, d, vocab_range());
}

void TransformerLM::stage_backward(int k, int slot, const StepContext& ctx, BackwardPart part, UnitHooks* hooks) {
  const Stage& st = stages_[k];
  const int64_t n = slice_.local_rows(ctx.rows()), d = c_.dim;
  const bool input = part != BackwardPart::weight, complete = part != BackwardPart::input;
  if (!input) {  // the weight gradients the input half kept, units in backward order
    if (st.has_head && hooks) hooks->post_backward(head_unit_);  // (its gradients came in forward)
    for (size_t j = st.blocks.size(); j-- > 0;) {
      st.blocks[j]->backward(nullptr, nullptr, nullptr, ctx, ws_, slot, part);
      if (hooks) hooks->post_backward(st.blocks[j]->unit());
    }
    if (st.has_embed) {
      // its output's gradient: given (the embedding alone), or kept by the input half
      embedding_backward(st.blocks.empty() && !st.has_head ? st.gout[slot] : st.gin[slot], slot, ctx);
      if (hooks) hooks->post_backward(embed_unit_);
    }
    return;
  }
  // each unit writes its input's gradient into a buffer other than its output's: the lowest one's
  // into the stage's (the embedding's stage: there only when W needs it later)
  const bool lowest_to_stage = !st.gin.empty();
  float* g = st.has_head ? nullptr : st.gout[slot];
  auto target = [&](bool lowest) -> float* {
    if (lowest && lowest_to_stage) return st.gin[slot];
    return g == ws_.grad_a ? ws_.grad_b : ws_.grad_a;
  };
  if (st.has_head) {
    if (hooks) hooks->pre_backward(head_unit_);
    float* dx = target(st.blocks.empty());
    const float* hin = unit_input(k, int(st.blocks.size()), slot);
    if (c_.final_norm)
      norm_f_.backward(hin, dhf_[slot], dx, n, false, slot);
    else
      dev_.copy(dx, dhf_[slot], sizeof(float) * size_t(n * d));
    if (complete && hooks) hooks->post_backward(head_unit_);
    g = dx;
  }
  for (size_t j = st.blocks.size(); j-- > 0;) {
    Block& b = *st.blocks[j];
    if (hooks) hooks->pre_backward(b.unit());
    float* dx = target(j == 0);
    b.backward(unit_input(k, int(j), slot), g, dx, ctx, ws_, slot, part);
    if (complete && hooks) hooks->post_backward(b.unit());
    g = dx;
  }
  if (st.has_embed) {
    if (hooks) hooks->pre_backward(embed_unit_);
    if (complete) {
      embedding_backward(g, slot, ctx);
      if (hooks) hooks->post_backward(embed_unit_);
    }
  }
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

void TransformerLM::queue_forward_backward(const int32_t* inputs, const int32_t* targets, const StepContext& ctx,
                                           UnitHooks* hooks) {
  DT_ASSERT(holds_whole_model());
  if (hooks) hooks->begin_pass(true);
  stage_forward(0, 0, inputs, targets, ctx, true, hooks);
  stage_backward(0, 0, ctx, BackwardPart::all, hooks);
  if (hooks) hooks->end_pass();
}

double TransformerLM::forward_loss(const int32_t* inputs, const int32_t* targets, const StepContext& ctx,
                                   float* per_row, UnitHooks* hooks) {
  DT_ASSERT(holds_whole_model());
  StepContext eval = ctx;
  eval.training = false;
  if (hooks) hooks->begin_pass(false);
  stage_forward(0, 0, inputs, targets, eval, false, hooks, per_row);
  if (hooks) hooks->end_pass();
  return take_loss();
}

void TransformerLM::logits(const int32_t* host_inputs, const StepContext& ctx, float* out, UnitHooks* hooks) {
  DT_ASSERT(holds_whole_model());
  StepContext eval = ctx;
  eval.training = false;
  const int64_t rows = ctx.rows();
  if (hooks) hooks->begin_pass(false);
  const float* h = regions_.all_rows(forward_units(0, 0, host_inputs, eval, hooks), ws_.full2, rows, c_.dim);
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
