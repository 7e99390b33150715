// RankState (see rank_state.hpp).
#include "train/checkpoint/rank_state.hpp"

#include <algorithm>

#include "train/checkpoint/tp_boxes.hpp"

namespace dtrain {

std::string RankState::optimizer_tensor(const std::string& family, const std::string& param) {
  return "optimizer." + family + "." + param;
}

RankState::RankState(Model& model, FullyShardedDataParallel* fsdp, Optimizer* opt, TpSlice tp)
    : model_(model), tp_(tp), fsdp_(fsdp), opt_(opt) {
  const std::vector<Unit*>& units = model.units();
  std::vector<float*> params(units.size());
  if (fsdp) {
    int64_t total = 0;
    for (size_t k = 0; k < units.size(); ++k) total += fsdp->shard_numel(k);
    const bool host = model.device().host_accessible();
    if (!host) shard_host_.resize(size_t(total));
    int64_t at = 0;
    for (size_t k = 0; k < units.size(); ++k) {
      params[k] = host ? fsdp->param_shard(k) : shard_host_.data() + at;
      if (!host) model.device().download(params[k], fsdp->param_shard(k), sizeof(float) * size_t(fsdp->shard_numel(k)));
      at += fsdp->shard_numel(k);
    }
  } else {
    float* all = model.host_params();
    for (size_t k = 0; k < units.size(); ++k) params[k] = all + model.offset_of(*units[k]);
  }
  for (size_t k = 0; k < units.size(); ++k) {
    const int64_t n = units[k]->numel();
    const int64_t begin = fsdp ? std::min(n, fsdp->shard_offset(k)) : 0;
    const int64_t end = fsdp ? std::min(n, begin + fsdp->shard_numel(k)) : n;
    held_.push_back({units[k], begin, end, {{"", params[k]}}});
  }
  if (opt)
    for (const Optimizer::StateView& s : opt->state())
      held_[s.shard].buffers.push_back({"optimizer." + s.family + ".", s.data});
}

// fn(tensor name, global shape, global box, host data of the box) for every box of part `part` (an
// expert unit's: `experts`) of each held range, for every buffer. Saving (`writing`), a parameter every tensor-parallel
// slice holds whole is split among the slices too (part `part`·slices + slice of parts·slices), so
// each value is written once; loading, every slice reads all of it.
template <class Fn>
void RankState::for_each_box(Part whole, Part experts, bool writing, Fn&& fn) const {
  const TpSlice tp = writing ? tp_ : TpSlice{};
  for (const Held& h : held_) {
    const int64_t len = h.end - h.begin;
    const auto [part, parts] = h.unit->experts() ? experts : whole;
    for (const ParamInfo& p : h.unit->params()) {
      const int64_t k = p.is_cut() ? part : part * tp.count + tp.index, K = p.is_cut() ? parts : parts * tp.count;
      const int64_t lo = h.begin + len * k / K, hi = h.begin + len * (k + 1) / K;
      const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.numel());
      if (a >= b) continue;
      for (const Box& box : boxes_of_flat_range(p.shape, a - p.offset, b - p.offset)) {
        // a box of a flat range is contiguous: it starts at its first element's flat index
        const int64_t first = p.offset + offset_within(whole_box(p.shape), box);
        for (const auto& [global, within] : global_boxes(p, box))
          for (const auto& [prefix, data] : h.buffers)
            fn(prefix + p.name, p.global_shape, global, data + (first - h.begin) + within);
      }
    }
  }
}

std::vector<ChunkSource> RankState::save_sources(Part part, Part experts) const {
  std::vector<ChunkSource> out;
  for_each_box(part, experts, true, [&](const std::string& name, const std::vector<int64_t>& shape, const Box& box,
                                float* data) { out.push_back({name, DType::f32, shape, box, data}); });
  return out;
}

std::vector<ChunkTarget> RankState::load_targets() {
  std::vector<ChunkTarget> out;
  for_each_box({}, {}, false, [&](const std::string& name, const std::vector<int64_t>& shape, const Box& box, float* data) {
    out.push_back({name, DType::f32, shape, box, data});
  });
  return out;
}

void RankState::upload() {
  if (fsdp_) {
    if (!shard_host_.empty()) {
      int64_t at = 0;
      for (size_t k = 0; k < fsdp_->num_units(); ++k) {
        model_.device().upload(fsdp_->param_shard(k), shard_host_.data() + at,
                               sizeof(float) * size_t(fsdp_->shard_numel(k)));
        at += fsdp_->shard_numel(k);
      }
      model_.device().synchronize();
    }
  } else {
    model_.upload_host_params();
  }
  if (opt_) opt_->upload_state();
}

}  // namespace dtrain
