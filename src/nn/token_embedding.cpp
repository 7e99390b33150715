// TokenEmbedding (see embedding.hpp).
#include "nn/token_embedding.hpp"


namespace dtrain {

TokenEmbedding::TokenEmbedding(ComputeDevice& dev, const EmbedHeadShape& c, TpSlice slice, TpRegions& regions)
    : Module("embed"), dev_(dev), c_(c), slice_(slice), regions_(regions) {
  const TpSplit vocab{0, 1};  // rows: the vocabulary
  wte_ = unit().add(c.table, {c.vocab_size, c.dim}, Init::xavier, 0, vocab, slice);
  if (c.positions == EmbedHeadShape::Positions::learned) wpe_ = unit().add(c.positions_table, {c.seq_len, c.dim}, Init::xavier);
  unit().set_backward_reads_params(false);  // its backward only scatters gradients
}

void TokenEmbedding::plan(Arena& arena, const StepContext& largest, const KeepPlan& keep) {
  const int64_t d = c_.dim;
  if (c_.positions == EmbedHeadShape::Positions::sinusoidal) pos_table_ = arena.f32(c_.seq_len * d);
  if (pos_table_ && !arena.is_counting()) {
    pos_host_.assign(size_t(c_.seq_len * d), 0.0f);
    sinusoidal_table(pos_host_.data(), c_.seq_len, d);
    dev_.upload(pos_table_, pos_host_.data(), sizeof(float) * pos_host_.size());
  }
  out_.clear();
  for (int slot = 0; slot < keep.slots; ++slot) out_.push_back(arena.f32(largest.rows() * d));
}

void TokenEmbedding::forward(const float*, const UnitPass& p) {
  const StepContext& ctx = p.ctx;
  const int64_t rows = ctx.rows(), d = c_.dim, n = slice_.local_rows(rows);
  float* out = out_[size_t(p.slot)];
  // each vocabulary slice's rows of the table (positions added by slice 0), summed across slices
  float* part = slice_.splits_rows() ? p.scratch : out;
  const float* pos = slice_.index != 0                                ? nullptr
                     : c_.positions == EmbedHeadShape::Positions::learned ? wpe_.data()
                                                                   : pos_table_;  // (none: null)
  dev_.embedding_forward(static_cast<const int32_t*>(p.inputs), wte_.data(), pos, part, ctx.B, ctx.T, d,
                         vocab_range());
  regions_.sum_partials(part, out, rows, d);
  dev_.dropout_forward(out, out, n, d, ctx.drop_rows(0, kEmbeddingDropSite, slice_.first_row(rows)));
}

void TokenEmbedding::backward(const float*, float* dy, float*, const UnitPass& p, BackwardPart part) {
  if (part == BackwardPart::input) return;  // no input gradient: the tokens are the input
  const StepContext& ctx = p.ctx;
  const int64_t rows = ctx.rows(), d = c_.dim, n = slice_.local_rows(rows);
  dev_.dropout_backward(dy, dy, n, d, ctx.drop_rows(0, kEmbeddingDropSite, slice_.first_row(rows)));
  dev_.embedding_backward(static_cast<const int32_t*>(p.inputs), regions_.all_rows(dy, p.scratch, rows, d),
                          wte_.grad(), c_.positions == EmbedHeadShape::Positions::learned ? wpe_.grad() : nullptr, ctx.B, ctx.T, d, vocab_range());
}

}  // namespace dtrain
