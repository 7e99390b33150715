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
  const bool shards = c_.positions != EmbedHeadShape::Positions::none && largest.T < c_.seq_len;
  pos_shard_ = shards ? arena.f32(largest.T * d) : nullptr;
  pos_shard_grad_ = shards && c_.positions == EmbedHeadShape::Positions::learned ? arena.f32(largest.T * d) : nullptr;
  out_.clear();
  for (int slot = 0; slot < keep.slots; ++slot) out_.push_back(arena.f32(largest.rows() * d));
}

const float* TokenEmbedding::positions(const StepContext& ctx) {
  const float* table = slice_.index != 0                                  ? nullptr
                       : c_.positions == EmbedHeadShape::Positions::learned ? wpe_.data()
                                                                          : pos_table_;  // (none: null)
  if (!table || !ctx.sequence.active()) return table;
  const SequenceShard& s = ctx.sequence;
  const size_t run = sizeof(float) * size_t(s.chunk * c_.dim);
  DT_ASSERT(pos_shard_ && ctx.T == 2 * s.chunk);
  dev_.copy(pos_shard_, table + s.first * c_.dim, run);
  dev_.copy(pos_shard_ + s.chunk * c_.dim, table + s.second * c_.dim, run);
  return pos_shard_;
}

void TokenEmbedding::add_position_grads(const StepContext& ctx) {
  const SequenceShard& s = ctx.sequence;
  const int64_t n = s.chunk * c_.dim;
  float* g = wpe_.grad();
  dev_.add(g + s.first * c_.dim, pos_shard_grad_, g + s.first * c_.dim, n);
  dev_.add(g + s.second * c_.dim, pos_shard_grad_ + n, g + s.second * c_.dim, n);
}

void TokenEmbedding::forward(const float*, const UnitPass& p) {
  const StepContext& ctx = p.ctx;
  const int64_t rows = ctx.rows(), d = c_.dim, n = slice_.local_rows(rows);
  float* out = out_[size_t(p.slot)];
  // each vocabulary slice's rows of the table (positions added by slice 0), summed across slices
  float* part = slice_.splits_rows() ? p.scratch : out;
  dev_.embedding_forward(static_cast<const int32_t*>(p.inputs), wte_.data(), positions(ctx), part, ctx.B, ctx.T, d,
                         vocab_range());
  regions_.sum_partials(part, out, rows, d);
  dev_.dropout_forward(out, out, n, d, ctx.drop_rows(0, kEmbeddingDropSite, slice_.first_row(rows)));
}

void TokenEmbedding::backward(const float*, float* dy, float*, const UnitPass& p, BackwardPart part) {
  if (part == BackwardPart::input) return;  // no input gradient: the tokens are the input
  const StepContext& ctx = p.ctx;
  const int64_t rows = ctx.rows(), d = c_.dim, n = slice_.local_rows(rows);
  dev_.dropout_backward(dy, dy, n, d, ctx.drop_rows(0, kEmbeddingDropSite, slice_.first_row(rows)));
  const bool learned = c_.positions == EmbedHeadShape::Positions::learned;
  const bool sharded = learned && ctx.sequence.active();
  if (sharded) dev_.zero(pos_shard_grad_, sizeof(float) * size_t(ctx.T * d));
  float* dpos = !learned ? nullptr : sharded ? pos_shard_grad_ : wpe_.grad();
  dev_.embedding_backward(static_cast<const int32_t*>(p.inputs), regions_.all_rows(dy, p.scratch, rows, d),
                          wte_.grad(), dpos, ctx.B, ctx.T, d, vocab_range());
  if (sharded) add_position_grads(ctx);
}

}  // namespace dtrain
