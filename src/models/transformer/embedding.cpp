// TokenEmbedding (see embedding.hpp).
#include "models/transformer/embedding.hpp"

#include "models/transformer/workspace.hpp"

namespace dtrain {

TokenEmbedding::TokenEmbedding(ComputeDevice& dev, const TransformerConfig& c, TpSlice slice, TpRegions& regions)
    : Module("embed"), dev_(dev), c_(c), slice_(slice), regions_(regions) {
  const TpSplit vocab{0, 1};  // rows: the vocabulary
  wte_ = unit().add("embed.weight", {c.vocab_size, c.dim}, Init::xavier, 0, vocab, slice);
  if (c.learned_positions) wpe_ = unit().add("pos.weight", {c.seq_len, c.dim}, Init::xavier);
  unit().set_backward_reads_params(false);  // its backward only scatters gradients
}

void TokenEmbedding::plan(Arena& arena, const StepContext& largest, int slots, bool) {
  const int64_t d = c_.dim;
  pos_table_ = arena.f32(c_.seq_len * d);
  if (!arena.is_counting()) {
    pos_host_.assign(size_t(c_.seq_len * d), 0.0f);
    sinusoidal_table(pos_host_.data(), c_.seq_len, d);
    dev_.upload(pos_table_, pos_host_.data(), sizeof(float) * pos_host_.size());
  }
  out_.clear();
  for (int slot = 0; slot < slots; ++slot) out_.push_back(arena.f32(largest.rows() * d));
}

void TokenEmbedding::forward(const float*, const UnitPass& p) {
  const StepContext& ctx = p.ctx;
  const int64_t rows = ctx.rows(), d = c_.dim, n = slice_.local_rows(rows);
  float* out = out_[size_t(p.slot)];
  // each vocabulary slice's rows of the table (positions added by slice 0), summed across slices
  float* part = slice_.splits_rows() ? p.scratch : out;
  const float* pos = slice_.index != 0 ? nullptr : c_.learned_positions ? wpe_.data() : pos_table_;
  dev_.embedding_forward(static_cast<const int32_t*>(p.inputs), wte_.data(), pos, part, ctx.B, ctx.T, d,
                         vocab_range());
  regions_.sum_partials(part, out, rows, d);
  dev_.dropout_forward(out, out, n, d, ctx.drop_rows(0, kDropEmbed, slice_.first_row(rows)));
}

void TokenEmbedding::backward(const float*, float* dy, float*, const UnitPass& p, BackwardPart part) {
  if (part == BackwardPart::input) return;  // no input gradient: the tokens are the input
  const StepContext& ctx = p.ctx;
  const int64_t rows = ctx.rows(), d = c_.dim, n = slice_.local_rows(rows);
  dev_.dropout_backward(dy, dy, n, d, ctx.drop_rows(0, kDropEmbed, slice_.first_row(rows)));
  dev_.embedding_backward(static_cast<const int32_t*>(p.inputs), regions_.all_rows(dy, p.scratch, rows, d),
                          wte_.grad(), c_.learned_positions ? wpe_.grad() : nullptr, ctx.B, ctx.T, d, vocab_range());
}

}  // namespace dtrain
